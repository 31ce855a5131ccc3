"""Public test harnesses: the coordinator on a virtual clock, real ZooKeeper servers, chroots, session expiry."""

from zkcoord.testing.coordinator import CoordinatorHarness

__all__ = ["CoordinatorHarness"]
