"""Hypothesis strategies for offsets-log records (zkcoord.offsets.records), shared by the tests.

Every value drawn is valid: it encodes, and decodes back equal. ``records()`` draws (key, value-or-None)
pairs whose value type matches the key; narrow its name pools to make keys collide.
"""

from hypothesis import strategies as st

from zkcoord.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# st.text never draws lone surrogates, which UTF-8 cannot encode; the samples make the edges likely.
names = st.text(max_size=12) | st.sampled_from(["", "g", "my-group", "😀grp", "Ωmega ü", "__consumer_offsets"])
nullable_names = st.none() | names
payloads = st.binary(max_size=48)

offset_commit_keys = st.builds(OffsetCommitKey, group=names, topic=names, partition=INT32)
group_metadata_keys = st.builds(GroupMetadataKey, group=names)

# v3 (no per-offset expiry, optional leader epoch) or v1 (explicit expiry, no leader epoch): §9.3.
offset_commit_values = st.builds(
    OffsetCommitValue,
    offset=INT64,
    metadata=names,
    commit_timestamp=INT64,
    expire_timestamp=st.just(-1),
    leader_epoch=INT32,
) | st.builds(
    OffsetCommitValue,
    offset=INT64,
    metadata=names,
    commit_timestamp=INT64,
    expire_timestamp=INT64.filter(lambda timestamp: timestamp != -1),
    leader_epoch=st.just(-1),
)

member_metadata = st.builds(
    MemberMetadata,
    member_id=names,
    group_instance_id=nullable_names,
    client_id=names,
    client_host=names,
    rebalance_timeout=INT32,
    session_timeout=INT32,
    subscription=payloads,
    assignment=payloads,
)

group_metadata_values = st.builds(
    GroupMetadataValue,
    protocol_type=names,
    generation=INT32,
    protocol=nullable_names,
    leader=nullable_names,
    current_state_timestamp=INT64,
    members=st.lists(member_metadata, max_size=4).map(tuple),
)


def records(
    groups: st.SearchStrategy[str] = names,
    topics: st.SearchStrategy[str] = names,
    partitions: st.SearchStrategy[int] = INT32,
    tombstone_probability: float = 0.25,
) -> st.SearchStrategy[tuple]:
    """(key, value) pairs; the value is None (a tombstone) about ``tombstone_probability`` of the time."""
    tombstone = st.floats(0, 1, exclude_max=True).map(lambda draw: draw < tombstone_probability)
    offset_records = st.tuples(
        st.builds(OffsetCommitKey, group=groups, topic=topics, partition=partitions),
        tombstone.flatmap(lambda dead: st.none() if dead else offset_commit_values),
    )
    group_records = st.tuples(
        st.builds(GroupMetadataKey, group=groups),
        tombstone.flatmap(lambda dead: st.none() if dead else group_metadata_values),
    )
    return offset_records | group_records
