"""Public test harnesses: the coordinator on a virtual clock, real ZooKeeper servers, chroots, session expiry.

``CoordinatorHarness`` is imported on first use, so that a process that needs only a light harness (a
``client_member`` started and restarted many times by a test) does not pay for the whole coordinator.
"""


def __getattr__(name: str):
    if name == "CoordinatorHarness":
        from zkcoord.testing.coordinator import CoordinatorHarness

        return CoordinatorHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CoordinatorHarness"]
