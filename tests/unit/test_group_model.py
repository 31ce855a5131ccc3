"""The pure pieces of the classic group coordinator: states, partitioning, protocols, membership, §9.5.

No harness: ``zkcoord.group.state``, ``zkcoord.group.model`` and the pure helpers of
``zkcoord.group.coordinator`` are driven directly. "§" numbers point to /work/shared/specs/group-coordinator.md,
"S95"/"S97" to /work/shared/specs/coordinator-scenarios.md. Expected values are written out from the spec, never
read back from the module under test.
"""

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.assign.java import java_string_hash
from zkcoord.errors import ErrorCode
from zkcoord.group.coordinator import GROUP_WRITE_ERRORS, OFFSET_COMMIT_ERRORS, mapped_append_error, partition_for
from zkcoord.group.model import Group, Member
from zkcoord.group.state import CAN_REBALANCE_STATES, VALID_PREVIOUS_STATES, IllegalStateTransition, check_transition
from zkcoord.offsets.records import GroupMetadataValue, MemberMetadata
from zkcoord.wire.consumer_protocol import Subscription, encode_subscription

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
STATES = (EMPTY, PREPARING, COMPLETING, STABLE, DEAD)

# ---- §1.1 / S95: the transition table --------------------------------------------------------------------

# Written out from §1.1 ("Allowed previous states") and S95 ("Allowed"), as (current, target).
ALLOWED = {
    (EMPTY, PREPARING),
    (STABLE, PREPARING),
    (COMPLETING, PREPARING),
    (PREPARING, COMPLETING),
    (COMPLETING, STABLE),
    (PREPARING, EMPTY),
    (STABLE, DEAD),
    (PREPARING, DEAD),
    (COMPLETING, DEAD),
    (EMPTY, DEAD),
    (DEAD, DEAD),
}
# The rejections §1.1 and S95 name explicitly.
NAMED_REJECTIONS = {
    (EMPTY, STABLE),
    (EMPTY, COMPLETING),
    (PREPARING, PREPARING),
    (PREPARING, STABLE),
    (STABLE, STABLE),
    (COMPLETING, COMPLETING),
    (DEAD, STABLE),
    (DEAD, PREPARING),
    (DEAD, COMPLETING),
    (DEAD, EMPTY),
}


def test_S95_transition_table_covers_every_pair():
    pairs = set(itertools.product(STATES, STATES))
    assert ALLOWED.isdisjoint(NAMED_REJECTIONS)
    assert len(pairs) == 25
    # The table as data says the same thing as the spec, target by target.
    assert set(VALID_PREVIOUS_STATES) == set(STATES)
    for target in STATES:
        assert VALID_PREVIOUS_STATES[target] == {current for current, t in ALLOWED if t == target}, target


@pytest.mark.parametrize(("current", "target"), sorted(itertools.product(STATES, STATES)))
def test_S95_transition_table(current, target):
    """§1.1: every (current, target) pair is accepted exactly when the table allows it; each sets the timestamp."""
    group = Group("g", 0, current, state_timestamp=5)
    if (current, target) in ALLOWED:
        check_transition("g", current, target)
        group.transition_to(target, 1234)
        assert (group.state, group.state_timestamp) == (target, 1234)
        assert group.is_dead() == (target == DEAD)
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition("g", current, target)
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target, 1234)
        # A rejected transition leaves the group untouched.
        assert (group.state, group.state_timestamp) == (current, 5)


def test_S95_can_rebalance_states():
    """§1.1: canRebalance is true exactly in Stable, CompletingRebalance and Empty (not Preparing, not Dead)."""
    assert {state for state in STATES if state in CAN_REBALANCE_STATES} == {STABLE, COMPLETING, EMPTY}
    assert PREPARING not in CAN_REBALANCE_STATES and DEAD not in CAN_REBALANCE_STATES
    # A state that can rebalance is exactly one from which PreparingRebalance may be entered.
    assert VALID_PREVIOUS_STATES[PREPARING] == CAN_REBALANCE_STATES


# ---- §9.1: partition of a group ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group_id", "hash_code", "partition"),
    [
        ("groupId", 293428218, 18),
        ("otherGroup", -204443313, 13),
        ("my-group", -1906497762, 12),
        ("", 0, 0),
        ("😀grp", 1276929186, 36),  # outside the BMP: two UTF-16 code units
        ("polygenelubricants", -(2**31), 0),  # kafka_abs(MIN_INT) = 0; plain abs would give 48
    ],
)
def test_partition_for_matches_the_jvm_vectors(group_id, hash_code, partition):
    """§9.1 test vectors, checked against the JVM, with 50 partitions."""
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id, 50) == partition


def test_partition_for_min_int_is_not_python_abs():
    """§9.1: ``kafka_abs(-2**31)`` is 0; with a partition count that does not divide 2**31 this shows."""
    assert partition_for("polygenelubricants", 50) == 0
    assert (2**31) % 50 == 48
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("polygenelubricants", 1) == 0


@given(st.text(max_size=12), st.integers(1, 200))
def test_partition_for_is_in_range_and_independent_of_python_hash(group_id, partitions):
    partition = partition_for(group_id, partitions)
    assert 0 <= partition < partitions
    code = java_string_hash(group_id)
    assert partition == (0 if code == -(2**31) else abs(code)) % partitions


# ---- helpers for members and groups ---------------------------------------------------------------------------


def member(
    member_id: str,
    protocols=(("range", b""),),
    instance: str | None = None,
    protocol_type: str = "consumer",
    assignment: bytes = b"",
) -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=instance,
        client_id="client",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=500,
        session_timeout_ms=300,
        protocol_type=protocol_type,
        protocols=tuple((name, metadata) for name, metadata in protocols),
        assignment=assignment,
    )


def names(*protocol_names: str) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, b"") for name in protocol_names)


def group_of(*members: Member, state: str = PREPARING) -> Group:
    """A group holding ``members`` in this order (the first one added leads)."""
    group = Group("g", 0, state, 0)
    for m in members:
        group.add(m, None)
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    return group


# ---- §2.5 / S97: protocol compatibility and selection ---------------------------------------------------------


def test_S97_empty_group_accepts_any_non_empty_type_and_list():
    group = Group("g", 0, EMPTY, 0)
    assert group.supports_protocols("consumer", ["range"])
    assert group.supports_protocols("anything", ["foo", "bar"])
    # §2.3 step 2: an Empty group needs a non-empty protocol type and a non-empty list.
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])


def test_S97_compatibility_counts_every_current_member():
    """S97 (GMT testSupportsProtocols): a protocol must be listed by every member, the joining one excluded."""
    group = group_of(member("m", names("range", "roundrobin")))
    assert group.state == PREPARING
    assert group.supports_protocols("consumer", ["roundrobin", "foo"])
    assert group.supports_protocols("consumer", ["range", "foo"])
    assert not group.supports_protocols("consumer", ["foo", "bar"])

    group.add(member("m2", names("roundrobin", "blah")), None)
    assert group.supports_protocols("consumer", ["roundrobin", "foo"])
    assert not group.supports_protocols("invalid_type", ["roundrobin", "foo"])
    assert not group.supports_protocols("consumer", ["range", "foo"])


def test_S97_sole_stable_member_cannot_switch_to_a_new_protocol_set():
    """S97 derived / Appendix C.4: the member's own old protocols are counted, so a new set is rejected (23)."""
    group = group_of(member("m", names("range")), state=STABLE)
    assert not group.supports_protocols("consumer", ["roundrobin"])
    assert group.supports_protocols("consumer", ["roundrobin", "range"])


def test_S97_compatibility_follows_protocol_updates_and_removals():
    """The per-name counts move with ``update_protocols`` and ``remove`` (GM ``updateMember``/``remove``)."""
    a, b = member("a", names("range", "roundrobin")), member("b", names("range"))
    group = group_of(a, b)
    assert not group.supports_protocols("consumer", ["roundrobin"])
    group.update_protocols(b, names("roundrobin"), None)
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["range"])
    group.remove("b")
    assert group.supports_protocols("consumer", ["range"])
    assert group.supported_protocols == Counter({"range": 1, "roundrobin": 1})


def test_S97_a_member_listing_a_protocol_twice_counts_once():
    """§0.3: ``supported_protocols`` maps a name to the number of *members* listing it (Kafka's MM ``protocols``
    is a Set; JoinGroup's protocol collection lets a name repeat). A sole member [range, range] lists range."""
    group = group_of(member("a", names("range", "range")))
    assert group.candidate_protocols() == {"range"}
    assert group.supports_protocols("consumer", ["range"])  # a second member with [range] may join (S97)


def test_S97_a_repeated_name_does_not_make_a_protocol_common_to_all_members():
    """§2.5: candidates are the names listed by all members; b does not list x, however often a lists it."""
    group = group_of(member("a", names("x", "x", "y")), member("b", names("y")))
    assert group.candidate_protocols() == {"y"}
    assert group.select_protocol() == "y"
    # §2.4 step 2: a rejoining with [x, x] would leave no protocol common to a and b: 23 in Kafka.
    assert not group.supports_protocols("consumer", ["x"])


@pytest.mark.parametrize(
    ("preferences", "selected"),
    [
        ([["range", "roundrobin"]], "range"),
        # A tie: [range, roundrobin] vs [roundrobin, range]; the longest-standing member's first choice wins.
        ([["range", "roundrobin"], ["roundrobin", "range"]], "range"),
        ([["roundrobin", "range"], ["range", "roundrobin"]], "roundrobin"),
        ([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "range"]], "roundrobin"),
        # GMT testSelectProtocolChoosesCompatibleProtocol: only roundrobin is listed by everyone.
        ([["range", "roundrobin"], ["roundrobin", "blah"]], "roundrobin"),
        # A majority beats the longest-standing member's preference.
        ([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin"]], "roundrobin"),
    ],
)
def test_S97_select_protocol_examples(preferences, selected):
    """§2.5 examples (GMT testSelectProtocol*) with zkcoord's documented tie-break."""
    group = group_of(*(member(f"m{i}", names(*p)) for i, p in enumerate(preferences)))
    assert group.select_protocol() == selected


def test_S97_tie_break_uses_the_longest_standing_members_preference_list_not_its_vote():
    """Ties go to the earliest of the tied names in the longest-standing member's list, even past its vote."""
    # Candidates: a, b, c. Votes: m0 → a, m1 → b, m2 → c: a three-way tie; m0 lists a first.
    group = group_of(member("m0", names("a", "c", "b")), member("m1", names("b", "a", "c")))
    group.add(member("m2", names("c", "a", "b")), None)
    assert group.select_protocol() == "a"
    # Now a is out (m3 does not list it): votes b (m1), c (m2, m0), b (m3) → a tie between b and c; m0's list
    # puts c before b.
    group.add(member("m3", names("b", "c")), None)
    assert group.select_protocol() == "c"


def _oracle_vote_counts(preferences: list[list[str]]) -> tuple[set[str], Counter]:
    candidates = set(preferences[0]).intersection(*map(set, preferences[1:]))
    votes = Counter(next(name for name in p if name in candidates) for p in preferences)
    return candidates, votes


@st.composite
def _preference_lists(draw):
    """2–5 members whose lists share at least one protocol, each in its own order, plus private extras."""
    shared = draw(st.lists(st.sampled_from(["range", "roundrobin", "sticky", "coop"]), min_size=1, unique=True))
    preferences = []
    for i in range(draw(st.integers(1, 5))):
        extras = draw(st.lists(st.sampled_from([f"x{i}", f"y{i}"]), unique=True))
        preferences.append(draw(st.permutations(shared + extras)))
    return [list(p) for p in preferences]


@settings(max_examples=200, deadline=None)
@given(_preference_lists(), st.randoms(use_true_random=False))
def test_S97_selection_is_a_most_voted_candidate_and_ignores_member_order_otherwise(preferences, rnd):
    """§2.5: the winner is listed by all and has the most first-choice votes. Only a tie looks at member order
    (the longest-standing member's list decides); without a tie any member order selects the same protocol."""
    candidates, votes = _oracle_vote_counts(preferences)
    group = group_of(*(member(f"m{i}", names(*p)) for i, p in enumerate(preferences)))
    selected = group.select_protocol()
    best = max(votes.values())
    tied = [name for name in preferences[0] if votes[name] == best]
    assert selected in candidates
    assert votes[selected] == best
    assert selected == tied[0]
    if len(tied) == 1:
        shuffled = list(enumerate(preferences))
        rnd.shuffle(shuffled)
        regrouped = group_of(*(member(f"m{i}", names(*p)) for i, p in shuffled))
        assert regrouped.select_protocol() == selected


def test_S28_all_members_joined_once_every_member_is_parked_and_no_pending_id_remains():
    """§2.8, whichever members rejoin first: one still out (first, middle or last) or a pending id holds the join."""
    group = group_of(*(member(f"m{i}") for i in range(5)))
    assert not group.all_members_joined()
    for request_id, member_id in enumerate(("m2", "m4", "m0", "m3")):
        group.members[member_id].awaiting_join = request_id
        assert not group.all_members_joined()
    group.members["m1"].awaiting_join = 9
    assert group.all_members_joined()
    group.pending_members.add("new")
    assert not group.all_members_joined()
    group.pending_members.clear()
    group.members["m4"].awaiting_join = None
    assert not group.all_members_joined()


# ---- §2.5 / §3.3: leader on removal, static replacement ---------------------------------------------------------


def test_first_member_added_leads_and_sets_the_protocol_type():
    """§2.5, §2.6 step 3: the first member of a group without members sets the protocol type and leads."""
    group = Group("g", 0, PREPARING, 0)
    group.add(member("a", protocol_type="consumer"), None)
    group.add(member("b", protocol_type="other"), None)
    assert (group.leader_id, group.protocol_type) == ("a", "consumer")


def test_removing_the_leader_hands_the_role_to_a_remaining_member():
    """§2.5: the leader becomes a remaining member (zkcoord: the longest-standing one), or none."""
    a, b, c = member("a"), member("b", instance="ib"), member("c")
    group = group_of(a, b, c)
    group.pending_sync.update({"a", "b", "c"})
    assert group.leader_id == "a"

    assert group.remove("b") is b
    assert group.leader_id == "a"  # removing a follower keeps the leader
    group.add(b, None)  # b is now the newest member: order a, c, b
    assert group.remove("a") is a
    assert group.leader_id in group.members
    assert group.leader_id == "c"  # zkcoord's rule: the longest-standing remaining member
    assert group.remove("c") is c
    assert group.leader_id == "b"
    assert group.remove("zzz") is None and group.leader_id == "b"
    assert group.remove("b") is b
    assert group.leader_id is None
    # §3.1: the static mapping goes with the member; so does its pending-sync entry.
    assert group.static_members == {} and group.pending_sync == set() and group.members == {}
    assert +group.supported_protocols == Counter()


def test_removing_keeps_a_static_mapping_that_points_elsewhere():
    """Only the mapping of the removed id is dropped (after a replacement the instance maps to the new id)."""
    group = group_of(member("old", instance="i"), member("other"))
    group.static_members["i"] = "new"
    group.remove("old")
    assert group.static_members == {"i": "new"}


def test_replace_static_member_rekeys_the_same_record():
    """§3.3 step 1 (GMT testReplaceGroupInstance): O is re-keyed as N; leader, mapping and pending sync follow."""
    old = member("O", names("range"), instance="i", assignment=b"assigned")
    follower = member("F")
    group = group_of(old, follower, state=COMPLETING)
    group.pending_sync.update({"O", "F"})
    assert group.leader_id == "O"

    replaced = group.replace_static_member("i", "O", "N")
    assert replaced is old
    assert replaced.member_id == "N" and replaced.assignment == b"assigned"
    assert set(group.members) == {"N", "F"} and group.members["N"] is old
    assert group.leader_id == "N"
    assert group.static_members == {"i": "N"}
    assert group.pending_sync == {"N", "F"}
    assert group.is_static_member_fenced("O", "i") and not group.is_static_member_fenced("N", "i")
    # Protocol counts are unchanged by the re-keying.
    assert group.supported_protocols == Counter({"range": 2})


def test_replace_static_member_of_a_follower_keeps_the_leader():
    group = group_of(member("L"), member("O", instance="i"), state=STABLE)
    group.replace_static_member("i", "O", "N")
    assert group.leader_id == "L"
    assert group.static_members == {"i": "N"}
    assert group.pending_sync == set()  # O was not pending: N is not added


def test_static_fencing_rule():
    """§3.2: fenced exactly when the instance is mapped to a different member id."""
    group = group_of(member("m", instance="i"))
    assert group.is_static_member_fenced("x", "i")
    assert group.is_static_member_fenced("", "i")
    assert not group.is_static_member_fenced("m", "i")
    assert not group.is_static_member_fenced("x", "unmapped")
    assert not group.is_static_member_fenced("x", None)


# ---- §9.5: append errors as group errors ----------------------------------------------------------------------

# (append error, group-metadata write, offset commit), row by row from §9.5.
MAPPING_ROWS = [
    ("UNKNOWN_TOPIC_OR_PARTITION", 15, 15),
    ("NOT_ENOUGH_REPLICAS", 15, 15),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 15, 15),
    ("NOT_LEADER_OR_FOLLOWER", 16, 16),
    ("KAFKA_STORAGE_ERROR", 16, 16),
    ("REQUEST_TIMED_OUT", 27, 7),
    ("MESSAGE_TOO_LARGE", -1, 28),
    ("RECORD_LIST_TOO_LARGE", -1, 28),
    ("INVALID_FETCH_SIZE", -1, 28),
    ("CORRUPT_MESSAGE", 2, 2),  # "anything else": passed through
]
MAPPED_NAMES = {row[0] for row in MAPPING_ROWS} - {"CORRUPT_MESSAGE"}


@pytest.mark.parametrize(("append_error", "group_write", "offset_commit"), MAPPING_ROWS)
def test_append_error_mapping_table(append_error, group_write, offset_commit):
    """§9.5 (GMMT testStoreGroupErrorMapping, testCommitOffsetFailure): both columns, every row."""
    error = ErrorCode[append_error]
    assert mapped_append_error(error, GROUP_WRITE_ERRORS) == group_write
    assert mapped_append_error(error, OFFSET_COMMIT_ERRORS) == offset_commit


@pytest.mark.parametrize("code", [code for code in ErrorCode if code.name not in MAPPED_NAMES], ids=lambda c: c.name)
def test_other_append_errors_pass_through_unchanged(code):
    """§9.5 "anything else": the append error itself reaches the client, in both columns."""
    assert mapped_append_error(code, GROUP_WRITE_ERRORS) == int(code)
    assert mapped_append_error(code, OFFSET_COMMIT_ERRORS) == int(code)


# ---- §9.6 step 5: groups as loaded ------------------------------------------------------------------------------


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


def test_from_record_stable_group():
    """§9.6 step 5: a record with members loads Stable; each member supports just the chosen protocol."""
    record = GroupMetadataValue(
        protocol_type="consumer",
        generation=7,
        protocol="roundrobin",
        leader="m2",
        current_state_timestamp=4321,
        members=(
            MemberMetadata("m1", "inst-1", "client-1", "/10.0.0.1", 60000, 10000, subscription("foo"), b"a1"),
            MemberMetadata("m2", None, "client-2", "/10.0.0.2", 30000, 20000, subscription("bar", "foo"), b"a2"),
        ),
    )
    group = Group.from_record("g", 3, record, now_ms=99999)
    assert (group.group_id, group.partition) == ("g", 3)
    assert group.state == STABLE
    assert group.generation == 7
    assert (group.protocol_type, group.protocol_name) == ("consumer", "roundrobin")
    assert group.leader_id == "m2"
    assert group.state_timestamp == 4321
    assert list(group.members) == ["m1", "m2"]
    m1, m2 = group.members["m1"], group.members["m2"]
    assert (m1.group_instance_id, m1.client_id, m1.client_host) == ("inst-1", "client-1", "/10.0.0.1")
    assert (m1.rebalance_timeout_ms, m1.session_timeout_ms) == (60000, 10000)
    assert m1.protocols == (("roundrobin", subscription("foo")),)
    assert m1.assignment == b"a1"
    assert m1.protocol_type == "consumer"
    assert (m2.group_instance_id, m2.rebalance_timeout_ms, m2.session_timeout_ms) == (None, 30000, 20000)
    assert m2.protocols == (("roundrobin", subscription("bar", "foo")),) and m2.assignment == b"a2"
    for m in (m1, m2):
        # Nothing transient survives a load.
        assert m.awaiting_join is None and m.awaiting_sync is None and not m.is_new and not m.is_leaving
    assert group.static_members == {"inst-1": "m1"}
    assert group.pending_members == set() and group.pending_sync == set()
    assert group.subscribed_topics == frozenset({"foo", "bar"})
    assert group.supported_protocols == Counter({"roundrobin": 2})
    assert group.offsets == {}
    # The loaded group writes back the record it was loaded from.
    assert group.metadata_record() == record


def test_from_record_stable_group_with_unknown_state_timestamp():
    record = GroupMetadataValue(
        "consumer", 1, "range", "m", -1, (MemberMetadata("m", None, "c", "/h", 100, 100, b"junk", b""),)
    )
    group = Group.from_record("g", 0, record, now_ms=50)
    assert group.state == STABLE and group.state_timestamp == -1
    # Unparseable subscription: the subscription is unknown (§7.6 "Subscribed topics").
    assert group.subscribed_topics is None


def test_from_record_empty_group():
    """§9.6 step 5 (GMMT testLoadEmptyGroupWithOffsets): Empty, keeping generation, type and timestamp."""
    record = GroupMetadataValue("consumer", 5, None, None, 777, ())
    group = Group.from_record("g", 0, record, now_ms=99999)
    assert group.state == EMPTY
    assert (group.generation, group.protocol_type, group.state_timestamp) == (5, "consumer", 777)
    assert group.protocol_name is None and group.leader_id is None
    assert group.members == {} and group.static_members == {}
    assert group.subscribed_topics == frozenset()  # a consumer group without members subscribes to nothing
    assert group.metadata_record() == record


def test_from_record_empty_group_of_another_protocol_type():
    group = Group.from_record("g", 0, GroupMetadataValue("connect", 2, None, None, 10, ()), now_ms=0)
    assert (group.state, group.protocol_type, group.subscribed_topics) == (EMPTY, "connect", None)


def test_from_record_none_is_an_offsets_only_group():
    """§9.6 step 5 (GMMT testLoadOffsetsWithoutGroup): no record → a fresh Empty group, generation 0, no type."""
    group = Group.from_record("g", 2, None, now_ms=12345)
    assert (group.group_id, group.partition, group.state) == ("g", 2, EMPTY)
    assert group.generation == 0
    assert group.protocol_type is None and group.protocol_name is None and group.leader_id is None
    assert group.members == {} and group.offsets == {}
    assert group.state_timestamp == -1  # unknown: retention counts from each commit (§7.6 (c))


def test_metadata_record_uses_the_metadata_of_the_chosen_protocol():
    """§9.3 "What is written": ``subscription`` is the member's metadata for the chosen protocol."""
    a = member("a", (("range", b"ra"), ("roundrobin", b"rr")), instance="ia", assignment=b"x")
    group = group_of(a, member("b", (("roundrobin", b"rb"),)), state=COMPLETING)
    group.protocol_name = "roundrobin"
    group.generation = 3
    record = group.metadata_record({"a": b"new-a", "zzz": b"ignored"})
    assert [(m.member_id, m.group_instance_id, m.subscription, m.assignment) for m in record.members] == [
        ("a", "ia", b"rr", b"new-a"),
        ("b", None, b"rb", b""),
    ]
    assert (record.protocol, record.leader, record.generation) == ("roundrobin", "a", 3)
    assert [m.assignment for m in group.metadata_record().members] == [b"x", b""]
