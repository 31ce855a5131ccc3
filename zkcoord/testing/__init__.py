"""Public test harnesses: real ZooKeeper servers, chroots, session expiry and dropped connections."""
