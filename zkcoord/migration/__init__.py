"""Offset migration between ZooKeeper and the offsets log: pure phases and rules, the step runner."""
