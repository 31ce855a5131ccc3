"""Exceptions raised to zkcoord's users.

Must not import anything from zkcoord: every other module imports this one.
"""

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's error codes as the coordinator answers them (group-coordinator.md §8, wire-protocol.md §5)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86

    @property
    def retriable(self) -> bool:
        """True when a client should look the coordinator up again or rejoin (wire-protocol.md §5)."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REBALANCE_IN_PROGRESS,
    }
)


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


class StopRequested(BaseException):  # noqa: N818 - a request, as KeyboardInterrupt is, not an error
    """SIGTERM where a command cannot wait for an event: it unwinds as Ctrl-C does, running the command's cleanup,
    and the command exits 0 (a requested stop). A BaseException, as KeyboardInterrupt, so no ``except Exception``
    swallows it."""


class ZooKeeperStartError(ZkcoordError):
    """The embedded ZooKeeper server did not come up."""


class ZooKeeperConnectionError(ZkcoordError):
    """No ZooKeeper session could be established in time."""


class CommitFailedError(ZkcoordError):
    """An offset commit named a partition this member does not own, or ZooKeeper or the offsets log refused it."""


class RebalanceInProgressError(CommitFailedError):
    """A commit asked for while the member rejoins its group, so not sent (Kafka's RebalanceInProgressException).

    Retriable: the member may still own the partitions (cooperative); commit again once poll() completed the
    rebalance.
    """


class CoordinatorMembersError(ZkcoordError):
    """A legacy member may not join a group that coordinator (new-client) members run: one protocol per group."""

    def __init__(self, group: str, state: str, member_ids: list[str]):
        self.group, self.state, self.member_ids = group, state, list(member_ids)
        example = f"e.g. member {member_ids[0]}" if member_ids else "no member listed yet"
        super().__init__(
            f"group {group!r} is run by coordinator (new-client) members ({len(member_ids)} live, {example}; "
            f"group state {state}): a legacy ZooKeeper member cannot join it; stop those members, or follow "
            "docs/migration.md to move the group between the protocols"
        )


class ConsumerTimeoutError(ZkcoordError):
    """No message arrived within ``consumer.timeout.ms`` (0.8.2's ConsumerTimeoutException)."""


class SourceError(ZkcoordError):
    """A record source cannot answer: unreachable cluster, unknown topic, bad source spec."""


class OffsetOutOfRangeError(SourceError):
    """A fetch asked for an offset the source does not hold (below the beginning or past the end)."""


class UnknownPartitionError(SourceError):
    """The source does not know the partition, or not yet: one just added may reach ZooKeeper before the
    brokers' metadata."""


class NoOffsetForPartitionError(ZkcoordError):
    """A partition has no committed offset and ``auto.offset.reset`` is ``none``."""


class IllegalStateError(ZkcoordError):
    """The call does not fit the consumer's state (e.g. ``subscribe`` after ``assign``, a closed consumer)."""


class WakeupError(ZkcoordError):
    """``wakeup()`` interrupted a blocking consumer call (Java's WakeupException)."""


def error_name(code: int) -> str:
    """Kafka's name of error ``code`` (``"REBALANCE_IN_PROGRESS"``), or ``"error <code>"`` for an unknown one."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


# Kafka's own message for each code (org.apache.kafka.common.protocol.Errors), for an answer that has none.
KAFKA_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.CORRUPT_MESSAGE: "This message has failed its CRC checksum, exceeds the valid size, has a null key "
    "for a compacted topic, or is otherwise corrupt.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.INVALID_FETCH_SIZE: "The requested fetch size is invalid.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the "
    "broker is not the current leader.",
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    ErrorCode.MESSAGE_TOO_LARGE: "The request included a message larger than the max message size the server will "
    "accept.",
    ErrorCode.OFFSET_METADATA_TOO_LARGE: "The metadata field of the offset request was too large.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    ErrorCode.RECORD_LIST_TOO_LARGE: "The request included message batch larger than the configured segment size "
    "on the server.",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Messages are written to the log, but to fewer in-sync replicas "
    "than required.",
    ErrorCode.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: "The group member's supported protocols are incompatible with those of "
    "existing members or first group member tried to join with empty protocol type or empty protocol list.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    ErrorCode.INVALID_SESSION_TIMEOUT: "The session timeout is not within the range allowed by the broker (as "
    "configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    ErrorCode.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: "The committing offset data size is not valid.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    ErrorCode.ILLEGAL_SASL_STATE: "Request is not valid given the current SASL state.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library "
    "or the message was sent to an incompatible broker. See the broker logs for more details.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.MEMBER_ID_REQUIRED: "The group member needs to have a valid member id before actually entering a "
    "consumer group.",
    ErrorCode.GROUP_MAX_SIZE_REACHED: "The consumer group has reached its max size.",
    ErrorCode.FENCED_INSTANCE_ID: "The broker rejected this static consumer since another consumer with the same "
    "group.instance.id has registered with a different member.id.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "The consumer group is actively subscribed to the topic",
}


class CoordinatorResponseError(ZkcoordError):
    """A request refused with one of Kafka's error codes, as Kafka's ``ApiException``: ``error_code`` is the
    number and the message the server's, else Kafka's own for the code. Make them with :func:`error_for`."""

    error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, error_code: int | None = None):
        if error_code is not None:
            self.error_code = error_code
        self.message = message or KAFKA_MESSAGES.get(self.error_code) or error_name(self.error_code)
        super().__init__(self.message)


class FencedInstanceIdError(CoordinatorResponseError):
    """Another consumer joined with this member's ``group.instance.id`` (KIP-345): fatal for this member."""

    error_code = ErrorCode.FENCED_INSTANCE_ID


class GroupIdNotFoundError(CoordinatorResponseError):
    error_code = ErrorCode.GROUP_ID_NOT_FOUND


class GroupNotEmptyError(CoordinatorResponseError):
    error_code = ErrorCode.NON_EMPTY_GROUP


class GroupSubscribedToTopicError(CoordinatorResponseError):
    error_code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class UnknownMemberIdError(CoordinatorResponseError):
    error_code = ErrorCode.UNKNOWN_MEMBER_ID


class UnknownTopicOrPartitionError(CoordinatorResponseError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class GroupAuthorizationFailedError(CoordinatorResponseError):
    """The principal may not do this to the group (Kafka's ACLs, docs/security.md)."""

    error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class TopicAuthorizationFailedError(CoordinatorResponseError):
    error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class SaslAuthenticationFailedError(CoordinatorResponseError):
    """Wrong credentials, an unknown user or a mechanism the listener does not enable: not retriable.

    ``message`` is what Kafka answers the client; ``reason`` what a server logs (it may name what the message
    keeps quiet about, such as whether the user exists).
    """

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, message: str | None = None, error_code: int | None = None, reason: str | None = None):
        super().__init__(message, error_code)
        self.reason = reason or self.message


class CoordinatorNotAvailableError(CoordinatorResponseError):
    """No coordinator answered in time (FindCoordinator kept failing, or nodes were unreachable)."""

    error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE


_ERROR_CLASSES: dict[int, type[CoordinatorResponseError]] = {
    cls.error_code: cls
    for cls in (
        FencedInstanceIdError,
        GroupIdNotFoundError,
        GroupNotEmptyError,
        GroupSubscribedToTopicError,
        UnknownMemberIdError,
        UnknownTopicOrPartitionError,
        GroupAuthorizationFailedError,
        TopicAuthorizationFailedError,
        SaslAuthenticationFailedError,
        CoordinatorNotAvailableError,
    )
}


def error_for(code: int, message: str | None = None) -> CoordinatorResponseError:
    """The one registry from an error code to the exception raised for it (client, admin, legacy member, tools)."""
    return _ERROR_CLASSES.get(code, CoordinatorResponseError)(message, error_code=code)


class LogError(ZkcoordError):
    """The offsets log cannot do what was asked; ``error_code`` is Kafka's error for it (group-coordinator §9.5)."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class CorruptLogError(LogError):
    """A segment holds bytes that are not valid entries; ``problem`` says which file, byte and offset."""

    error_code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, problem, hint: str | None = None):
        self.problem = problem
        super().__init__(
            f"{problem}; "
            + (
                hint
                or "the rest of this segment cannot be read (set log.recovery.skip.corrupt.segments=true, "
                "or pass --skip-corrupt, to read on from the next segment)"
            )
        )


class CorruptRecordError(LogError):
    """A record whose entry verifies but whose key or value does not decode; loading cannot go on."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnreadableLogStateError(LogError, ValueError):
    """A partition directory's own state file (``swap.json``, ``leader-epoch``) holds something else."""


class LogStorageError(LogError):
    """A write or fsync failed; the log accepts no more appends until it is reopened."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class RecordTooLargeError(LogError):
    """An append larger than ``message.max.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class LogInUseError(LogError):
    """Another process holds the partition directory's lock."""


class FencedLeaderError(LogError):
    """A newer leader epoch has claimed the partition directory: this node is no longer its leader and must not write.

    The log accepts no more appends; the partition's groups get NOT_COORDINATOR (group-coordinator §9.5, §10).
    """

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
