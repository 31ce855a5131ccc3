"""``migrate verify``: every partition's ZooKeeper offset against its log offset, for many groups at once.

ZooKeeper is read with pipelined requests across all groups (``zk.offsets.read_groups_offsets``); the
coordinators are asked with pipelined FindCoordinator and OffsetFetch requests, one connection per node.
A partition *regresses* when readers of the group's phase would see less than was committed
(``phases.regressions``); the write-behind lag is how far ZooKeeper is behind the log where it is. Given a
Kafka cluster (``--target-bootstrap-server``), the log is also compared with the group's offsets there
(``kafka_copy.pair_offsets``), and a partition a consumer of that cluster would start behind the log on fails
the check.

IO: a kazoo client (any handler), a :class:`~zkcoord.channel.CoordinatorChannel` and an optional
:class:`~zkcoord.migration.kafka_target.KafkaTarget`.
"""

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.channel import RETRIABLE, CoordinatorChannel, Unreachable, top_level_error
from zkcoord.errors import error_name
from zkcoord.migration.kafka_copy import OffsetPair, Side, behind_on_kafka, pair_offsets
from zkcoord.migration.kafka_target import KafkaTarget
from zkcoord.migration.phases import (
    LOG,
    MAX,
    RULES,
    ZK,
    Comparison,
    MigrationError,
    MigrationState,
    PartitionComparison,
    Phase,
    compare_stores,
    decode_state,
    regressions,
)
from zkcoord.zk import layout
from zkcoord.zk.offsets import read_groups_offsets

log = logging.getLogger(__name__)

Partition = tuple[str, int]

# How ZooKeeper behind the log reads in a phase whose readers do not read ZooKeeper alone, where it is expected;
# ``{behind}`` is "N partition(s) behind the log by M offset(s)".
ZK_BEHIND_EXPECTED = {
    Phase.DUAL_WRITE: "ZooKeeper {behind} (expected: readers take the larger of both stores)",
    Phase.LOG_PRIMARY: "ZooKeeper mirrored after the log: {behind} (expected while the mirror catches up)",
    Phase.LOG_ONLY: "ZooKeeper frozen since LOG_ONLY: {behind} (expected)",
}
READS = {ZK: "readers use ZooKeeper", LOG: "readers use the log", MAX: "readers take the larger of both stores"}


def readers_of(phase: Phase | None) -> str:
    """Which store a group's readers use, as a phrase; a group that is not migrating has a store per kind."""
    if phase is None:
        return "legacy readers use ZooKeeper, coordinator readers the log"
    return READS[RULES[phase].legacy_member.reads]


@dataclass
class GroupVerification:
    group: str
    state: MigrationState | None
    rows: list[PartitionComparison]
    unreadable: dict[Partition, str]
    zk_reads: int = 0
    kafka: list[OffsetPair] | None = None  # the log against the Kafka cluster's offsets, when one was given

    @property
    def phase(self) -> Phase | None:
        return None if self.state is None else self.state.phase

    @property
    def regressions(self) -> list[PartitionComparison]:
        """Nothing regresses in a group that is not migrating: its readers use the store they always used."""
        return [] if self.state is None else regressions(self.state.phase, self.rows)

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(row.status.value for row in self.rows)
        return {status.value: counted.get(status.value, 0) for status in Comparison}

    @property
    def lag_partitions(self) -> int:
        return sum(1 for row in self.rows if row.status == Comparison.LOG_AHEAD)

    @property
    def lag_offsets(self) -> int:
        """Offsets ZooKeeper is behind the log, summed over the partitions where it is behind."""
        return sum(row.log - row.zk for row in self.rows if row.status == Comparison.LOG_AHEAD)

    @property
    def expected_differences(self) -> list[PartitionComparison]:
        """Partitions where ZooKeeper is behind the log, or lacks an offset the log has, in a phase whose readers
        do not read ZooKeeper alone: what migrating leaves, not a fault."""
        if self.phase not in ZK_BEHIND_EXPECTED:
            return []
        bad = self.regressions
        return [
            row
            for row in self.rows
            if row not in bad and (row.status == Comparison.LOG_AHEAD or (row.zk is None and row.log is not None))
        ]

    @property
    def kafka_behind(self) -> list[OffsetPair]:
        return behind_on_kafka(self.kafka or [])

    @property
    def kafka_counts(self) -> dict[str, int]:
        counted = Counter(row.status.value for row in self.kafka or [])
        return {side.value: counted.get(side.value, 0) for side in Side}

    @property
    def ok(self) -> bool:
        return not self.regressions and not self.unreadable and not self.kafka_behind


def read_states(client: KazooClient, root: str, groups: list[str]) -> dict[str, MigrationState | None]:
    """Each group's migration state (None when it has none), pipelined; foreign data is an error."""
    pending = [(g, client.get_async(layout.migration_path(root, g))) for g in groups]
    states: dict[str, MigrationState | None] = {}
    for group, reply in pending:
        try:
            data, _ = reply.get()
        except NoNodeError:
            states[group] = None
            continue
        states[group] = decode_state(layout.migration_path(root, group), data)
    return states


def log_offsets(channel: CoordinatorChannel, groups: list[str]) -> dict[str, dict[Partition, int]]:
    """Every group's committed log offsets, asking each coordinator node for its groups in one pipeline."""
    found: dict[str, dict[Partition, int]] = {}
    by_node: dict[tuple[str, int], list[str]] = {}
    lookups = _pipeline_any(channel, [("FindCoordinator", {"key": g, "key_type": 0}) for g in groups])
    for group, answer in zip(groups, lookups, strict=True):
        if answer is not None and top_level_error(answer) == 0:
            by_node.setdefault((answer["host"], answer["port"]), []).append(group)
        else:
            found[group] = fetch_log_offsets(channel, group)
    for address, members in by_node.items():
        try:
            answers = channel.pipeline(
                address, [("OffsetFetch", {"group_id": g, "topics": None, "log_only": True}) for g in members]
            )
        except Unreachable:
            answers = [None] * len(members)
        for group, answer in zip(members, answers, strict=True):
            if answer is None or top_level_error(answer) in RETRIABLE:
                found[group] = fetch_log_offsets(channel, group)  # moved or loading: the channel looks it up again
            else:
                found[group] = offsets_in(group, answer)
    return found


def _pipeline_any(channel: CoordinatorChannel, requests: list[tuple[str, dict]]) -> list[dict | None]:
    for address in channel.addresses():
        try:
            return channel.pipeline(address, requests)
        except Unreachable as error:
            log.warning("node did not answer, trying another: %s", error)
    return [None] * len(requests)


def fetch_log_offsets(channel: CoordinatorChannel, group: str) -> dict[Partition, int]:
    """Every offset the group's log holds (OffsetFetch for all partitions, ``log_only``: not the max with ZooKeeper)."""
    answer, _ = channel.call_coordinator(group, "OffsetFetch", group_id=group, topics=None, log_only=True)
    return offsets_in(group, answer)


def describe_group(channel: CoordinatorChannel, group: str) -> dict:
    """The group as its coordinator describes it (DescribeGroups), asked again while the group's entry says its
    coordinator is loading or moving; :class:`MigrationError` for any other error."""
    response, _ = channel.call_coordinator(
        group,
        "DescribeGroups",
        retriable=lambda r: any(top_level_error(g) in RETRIABLE for g in r.get("groups") or []),
        groups=[group],
    )
    described = (response.get("groups") or [{}])[0]
    raise_for(described, f"DescribeGroups for group {group}")
    return described


def offsets_in(group: str, answer: dict) -> dict[Partition, int]:
    """The committed offsets of an OffsetFetch answer (partitions with an error or no offset left out)."""
    raise_for(answer, f"OffsetFetch for group {group}")
    return {
        (topic["name"], entry["partition_index"]): entry["committed_offset"]
        for topic in answer.get("topics") or []
        for entry in topic.get("partitions") or []
        if entry.get("error_code", 0) == 0 and entry["committed_offset"] >= 0
    }


def verify_groups(
    client: KazooClient,
    channel: CoordinatorChannel,
    root: str,
    groups: Iterable[str],
    batch: int = 200,
    advance: Callable[[int], None] = lambda n: None,
    target: KafkaTarget | None = None,
) -> list[GroupVerification]:
    """Compare both stores of every group (and the log with ``target``'s offsets), ``batch`` groups per pipeline;
    ``advance(n)`` after each batch."""
    groups = list(groups)
    results = []
    for start in range(0, len(groups), batch):
        chunk = groups[start : start + batch]
        states = read_states(client, root, chunk)
        zk = read_groups_offsets(client, chunk)
        logged = log_offsets(channel, chunk)
        on_kafka = None if target is None else target.offsets_of(chunk)
        for group in chunk:
            rows = compare_stores(zk[group].offsets, logged[group])
            pairs = None if on_kafka is None else pair_offsets(logged[group], on_kafka[group])
            results.append(
                GroupVerification(group, states[group], rows, zk[group].unreadable, zk[group].requests + 1, pairs)
            )
        advance(len(chunk))
    return results


def raise_for(response: dict, what: str) -> None:
    """:class:`MigrationError` naming Kafka's error when ``response`` carries a top-level error."""
    code = top_level_error(response)
    if code:
        raise MigrationError(f"{what} failed: {error_name(code)} {response.get('error_message') or ''}".rstrip())
