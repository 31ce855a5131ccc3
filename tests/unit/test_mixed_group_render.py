"""A mixed group described as one group: its members' kinds, partitions and owner mismatches, and the KIND column
of ``zkcoord groups describe`` (zkcoord.admin.model.mixed_group, zkcoord.admin.render)."""

from zkcoord.admin import render
from zkcoord.admin.model import (
    COORDINATOR,
    LEGACY,
    MIXED,
    GroupDescription,
    GroupOffsetsDescription,
    MemberDescription,
    Node,
    OwnerMismatch,
    mixed_group,
    offset_rows,
)
from zkcoord.model import TopicPartition
from zkcoord.zk.layout import BridgeMember, BridgeState


def tp(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


BRIDGED = "g_zkcoord-0123456789abcdef"  # the consumer id the bridge registered member "client-1" under
BRIDGE = BridgeState("range", 3, (BridgeMember(BRIDGED, "client-1", None, ("t",)),))


def legacy_half(bridged_owns: tuple[TopicPartition, ...]) -> GroupDescription:
    """/consumers/g as the legacy admin reads it: every registration with the partitions its owner znodes give it."""
    members = (
        MemberDescription("g_host-1", None, None, None, (tp(0), tp(1)), LEGACY),
        MemberDescription(BRIDGED, None, None, None, bridged_owns, LEGACY),
    )
    return GroupDescription("g", LEGACY, "Stable", "consumer", "", members, None)


def coordinator_half(state: str = "Stable") -> GroupDescription:
    member = MemberDescription("client-1", None, "app", "/10.0.0.7", (tp(2), tp(3)))
    return GroupDescription("g", COORDINATOR, state, "consumer", "range", (member,), None)


def test_members_are_split_by_kind_with_their_own_partitions():
    mixed = mixed_group(legacy_half((tp(2), tp(3))), coordinator_half(), BRIDGE)
    assert (mixed.kind, mixed.state, mixed.protocol) == (MIXED, "Stable", "range")
    assert [(m.kind, m.member_id, m.assignment) for m in mixed.members] == [
        (LEGACY, "g_host-1", (tp(0), tp(1))),
        (COORDINATOR, "client-1", (tp(2), tp(3))),
    ]
    assert mixed.mismatches == ()


def test_owner_znodes_that_differ_from_the_assignment_are_a_mismatch():
    mixed = mixed_group(legacy_half((tp(2),)), coordinator_half("CompletingRebalance"), BRIDGE)
    assert mixed.state == "CompletingRebalance"
    assert mixed.mismatches == (OwnerMismatch("client-1", BRIDGED, (tp(2),), (tp(2), tp(3))),)
    assert render.mismatch_notices(mixed) == [
        "Warning: coordinator member client-1 of consumer group 'g' is assigned t(2,3) but the owner znodes give its "
        f"thread {BRIDGED}-0 t(2)."
    ]


def test_a_member_the_bridge_has_not_registered_yet_is_named_once_it_has_partitions():
    joining = MemberDescription("client-2", None, "app", "/10.0.0.8", (tp(4),))
    members = (*coordinator_half().members, joining)
    coordinator = GroupDescription("g", COORDINATOR, "Stable", "consumer", "range", members, None)
    mixed = mixed_group(legacy_half((tp(2), tp(3))), coordinator, BRIDGE)
    assert mixed.mismatches == (OwnerMismatch("client-2", None, (), (tp(4),)),)
    assert render.mismatch_notices(mixed) == [
        "Warning: coordinator member client-2 of consumer group 'g' is not registered in ZooKeeper; it is assigned "
        "t(4)."
    ]


def test_a_registration_the_coordinator_lost_still_holds_its_partitions():
    """Every node gone: the bridge's registration and owner znodes stay, and the view says who holds what."""
    mixed = mixed_group(legacy_half((tp(2), tp(3))), None, BRIDGE)
    assert [(m.kind, m.member_id, m.assignment) for m in mixed.members][1] == (COORDINATOR, "client-1", (tp(2), tp(3)))
    assert mixed.coordinator is None and mixed.state == "Stable"
    assert mixed.mismatches == (OwnerMismatch("client-1", BRIDGED, (tp(2), tp(3)), None),)
    assert render.mismatch_notices(mixed) == [
        "Warning: coordinator member client-1 of consumer group 'g' has no coordinator answering; its registration "
        f"{BRIDGED} still owns t(2,3) until a node releases it."
    ]
    node = Node(1, "127.0.0.1", 9092)
    coordinator_left = GroupDescription("g", COORDINATOR, "Empty", "consumer", "", (), node)
    assert (
        "is gone from the coordinator"
        in render.mismatch_notices(mixed_group(legacy_half((tp(2), tp(3))), coordinator_left, BRIDGE))[0]
    )


def test_offsets_and_members_tables_have_a_kind_column():
    mixed = mixed_group(legacy_half((tp(2), tp(3))), coordinator_half(), BRIDGE)
    committed = {tp(p): 10 * p for p in range(5)}
    result = GroupOffsetsDescription(mixed, offset_rows(mixed, committed, {tp(p): 100 for p in range(5)}))
    blank, header, *rows = render.offsets_lines(result)
    assert blank == "" and header.split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "KIND", "CONSUMER-ID", "HOST",
        "CLIENT-ID",
    ]  # fmt: skip
    assert [row.split() for row in rows] == [
        ["g", "t", "0", "0", "100", "100", "legacy", "g_host-1", "-", "-"],
        ["g", "t", "1", "10", "100", "90", "legacy", "g_host-1", "-", "-"],
        ["g", "t", "2", "20", "100", "80", "coordinator", "client-1", "/10.0.0.7", "app"],
        ["g", "t", "3", "30", "100", "70", "coordinator", "client-1", "/10.0.0.7", "app"],
        ["g", "t", "4", "40", "100", "60", "-", "-", "-", "-"],
    ]
    assert header.index("KIND") == rows[0].index("legacy") == rows[2].index("coordinator")
    blank, header, *rows = render.members_lines(mixed, verbose=True)
    assert header.split() == ["GROUP", "KIND", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert [row.split() for row in rows] == [
        ["g", "legacy", "g_host-1", "-", "-", "2", "t(0,1)"],
        ["g", "coordinator", "client-1", "/10.0.0.7", "app", "2", "t(2,3)"],
    ]
    document = render.offsets_json(result)
    assert document["kind"] == MIXED and document["owner_mismatches"] == []
    assert [row["kind"] for row in document["offsets"]] == [LEGACY, LEGACY, COORDINATOR, COORDINATOR, None]
    assert [m["kind"] for m in render.members_json(mixed)["members"]] == [LEGACY, COORDINATOR]


def test_a_group_of_one_kind_has_no_kind_column():
    legacy = legacy_half(())
    result = GroupOffsetsDescription(legacy, offset_rows(legacy, {}, {}))
    assert "KIND" not in render.offsets_lines(result)[1]
    assert "KIND" not in render.members_lines(legacy, verbose=False)[1]
    document = render.members_json(legacy)
    assert "owner_mismatches" not in document and "kind" not in document["members"][0]
    assert render.mismatch_notices(legacy) == []
