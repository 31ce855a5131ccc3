"""Where a legacy member commits and reads offsets: ZooKeeper, the coordinator's offsets log, or both.

Spec: legacy-zk-protocol.md §5.1–§5.3. :func:`mode_for` turns the member's ``offsets.storage`` and
``dual.commit.enabled`` and its group's migration state into an :class:`OffsetsMode`; the group's phase,
once it has one, wins over the config (``zkcoord.migration.phases.RULES``). :class:`LogOffsets` sends the
member's OffsetCommit, OffsetFetch and DescribeGroups to the group's coordinator, as 0.8.2 sends its v1
requests to the offset manager.

IO: only through the :class:`~zkcoord.channel.CoordinatorChannel` it is given (gevent sockets and
sleep inside the member's hub).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zkcoord.channel import RETRIABLE, CoordinatorChannel, top_level_error
from zkcoord.errors import ErrorCode, ZkcoordError, error_for
from zkcoord.legacy.config import OFFSETS_STORAGE_KAFKA, OFFSETS_STORAGE_ZOOKEEPER
from zkcoord.migration.phases import LOG, MAX, NO_OFFSET, RULES, ZK, MigrationState, Phase, StoreRule
from zkcoord.model import GroupState, TopicPartition
from zkcoord.wire.requests import partition_error_codes, simple_offset_commit
from zkcoord.zk import layout

# Group states in which a coordinator group has nobody who could be consuming (wire-protocol.md §3).
INACTIVE_STATES = frozenset({GroupState.EMPTY, GroupState.DEAD})


class LogUnavailableError(ZkcoordError):
    """No coordinator of the group answered within ``offsets.channel.socket.timeout.ms``."""


@dataclass(frozen=True)
class OffsetsMode:
    """Where the member commits (in order) and reads now, and the phase it follows (None: its config)."""

    rule: StoreRule
    phase: Phase | None = None
    epoch: int = -1

    @property
    def writes_log(self) -> bool:
        return LOG in self.rule.writes

    @property
    def writes_zk(self) -> bool:
        return ZK in self.rule.writes

    @property
    def reads(self) -> str:
        return self.rule.reads

    @property
    def uses_log(self) -> bool:
        return self.writes_log or self.reads != ZK

    @property
    def storage(self) -> str:
        """The 0.8.2 ``offsets.storage`` this mode amounts to."""
        return OFFSETS_STORAGE_KAFKA if self.writes_log else OFFSETS_STORAGE_ZOOKEEPER

    @property
    def dual_commit(self) -> bool:
        return self.writes_log and self.writes_zk

    def advert(self) -> bytes:
        """The member's advertisement (``layout.legacy_advert_path``) for this mode."""
        phase = "" if self.phase is None else self.phase.name
        return layout.encode_legacy_advert(phase, self.epoch, self.storage, self.dual_commit)

    def describe(self) -> str:
        follows = "its config" if self.phase is None else f"phase {self.phase.name} (epoch {self.epoch})"
        return f"{follows}: writes {', '.join(self.rule.writes)}; reads {self.reads}"

    def trace_fields(self) -> dict:
        return {
            "phase": None if self.phase is None else self.phase.name,
            "epoch": self.epoch,
            "writes": list(self.rule.writes),
            "reads": self.reads,
            "storage": self.storage,
            "dual_commit": self.dual_commit,
        }


def mode_for(storage: str, dual_commit: bool, state: MigrationState | None) -> OffsetsMode:
    """The group's phase if it has a migration state, else the config exactly as 0.8.2 reads it (§5.1, §5.2)."""
    if state is not None:
        return OffsetsMode(RULES[state.phase].legacy_member, state.phase, state.epoch)
    if storage == OFFSETS_STORAGE_ZOOKEEPER:
        return OffsetsMode(StoreRule((ZK,), ZK))
    if dual_commit:
        return OffsetsMode(StoreRule((LOG, ZK), MAX))
    return OffsetsMode(StoreRule((LOG,), LOG))


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


class LogOffsets:
    """A group's offsets in the coordinator's log, through ``channel``. Use from one greenlet at a time."""

    def __init__(self, channel: CoordinatorChannel, group: str):
        self.channel = channel
        self.group = group

    def close(self) -> None:
        self.channel.close()

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """One simple OffsetCommit, as 0.8.2's v1 (generation -1, no member id, metadata ""); the error code of
        each partition (0: accepted). 14/15/16 drop the connection so the next call looks the coordinator up."""
        response, (_, address) = self._call(
            "OffsetCommit",
            lambda r: False,  # a commit is one try (§5.1); the caller decides about retries
            **simple_offset_commit(self.group, offsets),
        )
        codes = dict.fromkeys(offsets, top_level_error(response) or int(ErrorCode.UNKNOWN_SERVER_ERROR))
        answered = partition_error_codes(response)
        codes.update({tp: answered[tp] for tp in codes if tp in answered})
        if any(code in RETRIABLE for code in codes.values()):
            self.channel.drop(address)
        return codes

    def fetch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """One OffsetFetch (the channel looks the coordinator up again on 14/15/16 until its deadline).

        A partition without an offset, or with an error of its own, gets -1 (§5.2).
        """
        wanted = sorted(set(partitions))
        if not wanted:
            return {}

        def retriable(response: dict) -> bool:
            codes = {top_level_error(response)}
            codes.update(p.get("error_code", 0) for t in response.get("topics") or [] for p in t["partitions"] or [])
            return bool(codes & RETRIABLE)

        response, _ = self._call(
            "OffsetFetch",
            retriable,
            group_id=self.group,
            topics=[{"name": t, "partition_indexes": p} for t, p in _by_topic(wanted).items()],
        )
        if top_level_error(response):
            raise error_for(top_level_error(response), response.get("error_message"))
        offsets = dict.fromkeys(wanted, NO_OFFSET)
        for topic in response.get("topics") or []:
            for partition in topic.get("partitions") or []:
                tp = TopicPartition(topic["name"], partition["partition_index"])
                if tp in offsets and partition.get("error_code", 0) == 0:
                    offsets[tp] = partition["committed_offset"]
        return offsets

    def describe(self) -> tuple[str, list[str]]:
        """``(group state, member ids)`` of the group at its coordinator (DescribeGroups)."""

        def retriable(response: dict) -> bool:
            groups = response.get("groups") or []
            return (groups[0]["error_code"] if groups else top_level_error(response)) in RETRIABLE

        response, _ = self._call("DescribeGroups", retriable, groups=[self.group])
        groups = response.get("groups") or []
        if not groups:
            code = top_level_error(response) or int(ErrorCode.UNKNOWN_SERVER_ERROR)
            raise error_for(code, response.get("error_message"))
        group = groups[0]
        if group["error_code"]:
            raise error_for(group["error_code"])
        return group["group_state"], [member["member_id"] for member in group.get("members") or []]

    def _call(self, api: str, retriable, **fields) -> tuple[dict, tuple]:
        return self.channel.call_coordinator(self.group, api, retriable=retriable, **fields)
