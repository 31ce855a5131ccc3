"""ZooKeeper: znode layout and codecs, kazoo sessions, and the embedded server launcher."""
