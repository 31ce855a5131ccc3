"""Exceptions raised to zkcoord's users.

Must not import anything from zkcoord: every other module imports this one.
"""


class ZkcoordError(Exception):
    """Base class of every error zkcoord raises on purpose."""


class ConfigError(ZkcoordError, ValueError):
    """A configuration value is missing, unknown or invalid."""


class LegacyAssignmentError(ZkcoordError):
    """Kafka 0.8.2's assignor would throw here; ``kind`` names the Java exception class it throws.

    ``message`` is the text 0.8.2 gives (without Scala's ``requirement failed:`` prefix);
    ``detail`` carries what zkcoord adds to help an operator.
    """

    def __init__(self, kind: str, message: str, detail: str = ""):
        self.kind = kind
        self.message = message
        self.detail = detail
        super().__init__(f"{kind}: {message}" + (f" ({detail})" if detail else ""))


class ConsumerRebalanceFailedError(ZkcoordError):
    """Every rebalance attempt failed (0.8.2's ConsumerRebalanceFailedException)."""


class ZooKeeperNotFoundError(ZkcoordError):
    """No ZooKeeper jars (or no java) to start an embedded server with."""


class ZooKeeperStartError(ZkcoordError):
    """The embedded ZooKeeper server did not come up."""


class ZooKeeperConnectionError(ZkcoordError):
    """No ZooKeeper session could be established in time."""


class CommitFailedError(ZkcoordError):
    """An offset commit named a partition this member does not own, or ZooKeeper refused it."""
