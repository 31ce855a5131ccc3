"""The offsets log: its records and codec, the store rebuilt from it, and offset retention.

See group-coordinator.md §7.6 (retention) and §9 (the log). Pure: nothing here does IO or reads a clock.
"""

from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordError,
    RecordKey,
    RecordValue,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from zkcoord.offsets.retention import GroupView, expired_offsets, subscribed_topics, view_of_loaded_group
from zkcoord.offsets.store import CommittedOffset, OffsetStore

__all__ = [
    "CommittedOffset",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupView",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "OffsetStore",
    "RecordError",
    "RecordKey",
    "RecordValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "expired_offsets",
    "subscribed_topics",
    "view_of_loaded_group",
]
