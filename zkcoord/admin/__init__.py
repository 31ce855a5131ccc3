"""Consumer-group administration, as Kafka's ``KafkaAdminClient`` and ``kafka-consumer-groups`` do it, over
coordinator groups (wire protocol) and legacy 0.8.2 groups (ZooKeeper). See docs/admin.md.

Exports the client, its result types and errors; the text/JSON layout lives in ``zkcoord.admin.render``.
"""

from zkcoord.admin.client import AdminClient
from zkcoord.admin.model import (
    COORDINATOR,
    LEGACY,
    MIXED,
    GroupAdminError,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupOffsetsDescription,
    GroupResult,
    InvalidResetError,
    MemberDescription,
    MemberRemoval,
    Node,
    OffsetAndMetadata,
    OffsetDeletion,
    OwnerMismatch,
    PartitionOffsetRow,
    ResetPlan,
    ResetSpec,
)
from zkcoord.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

__all__ = [
    "COORDINATOR",
    "LEGACY",
    "MIXED",
    "AdminClient",
    "CoordinatorNotAvailableError",
    "GroupAdminError",
    "GroupDescription",
    "GroupIdNotFoundError",
    "GroupListing",
    "GroupNotEmptyError",
    "GroupOffsets",
    "GroupOffsetsDescription",
    "GroupResult",
    "GroupSubscribedToTopicError",
    "InvalidResetError",
    "MemberDescription",
    "MemberRemoval",
    "Node",
    "OffsetAndMetadata",
    "OffsetDeletion",
    "OwnerMismatch",
    "PartitionOffsetRow",
    "ResetPlan",
    "ResetSpec",
    "UnknownMemberIdError",
    "UnknownTopicOrPartitionError",
]
