"""The windows of every watched group, built from periodic observations of committed offsets and log ends.

Kafka's OffsetFetch says what is committed, not when, so a poll counts as a commit when the offset moved since the
last one, or when a live member owns the partition and a commit interval passed since the last (docs/lag.md).
Pure: the caller passes ``now_ms``; the windows go to and come from JSON (``zkcoord lag --state-file``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from zkcoord.lag.evaluator import Commit, GroupLag, GroupStatus, PartitionWindow, WindowConfig, evaluate_group
from zkcoord.model import TopicPartition

STATE_VERSION = 1
BURROW_DEFAULTS = WindowConfig()


@dataclass(frozen=True)
class PartitionObservation:
    """One poll of one partition: the offset the group's readers would start from, the log end (None: unknown),
    whether a live member owns the partition, and an id of the store's last write of that offset when the store
    has one (a legacy znode's mzxid: each commit, and only a commit, changes it; None: unknown)."""

    committed: int
    log_end: int | None
    owned: bool
    write_id: int | None = None


class LagWindows:
    """Per group and partition, a :class:`PartitionWindow` of ``config.intervals`` commits."""

    def __init__(self, config: WindowConfig = BURROW_DEFAULTS):
        self.config = config
        self._groups: dict[str, dict[TopicPartition, PartitionWindow]] = {}
        self._on_coordinator: set[str] = set()  # groups last seen on a coordinator: missing, they may be unreachable

    def observe(
        self,
        group_id: str,
        observed: Mapping[TopicPartition, PartitionObservation] | None,
        now_ms: int,
        on_coordinator: bool = False,
    ):
        """Add one poll of ``group_id`` (``on_coordinator``: a coordinator holds it); None: the group exists nowhere
        now, and its windows are dropped."""
        if observed is None:
            self.retain(set(self._groups) - {group_id})
            return
        if on_coordinator:
            self._on_coordinator.add(group_id)
        else:
            self._on_coordinator.discard(group_id)
        before = self._groups.get(group_id, {})
        windows = {}
        for tp, seen in observed.items():
            window = before.get(tp, PartitionWindow())
            if seen.log_end is None:  # a commit without a log end has no lag: Burrow drops it
                windows[tp] = replace(window, end_known=False)
                continue
            window = window.with_log_end(seen.log_end, self.config)
            if self._committed_since(window, seen, now_ms):
                window = window.with_commit(seen.committed, now_ms, self.config)
            windows[tp] = replace(window, write_id=seen.write_id, end_known=True)
        self._groups[group_id] = windows

    def _committed_since(self, window: PartitionWindow, seen: PartitionObservation, now_ms: int) -> bool:
        """Whether the group committed since the window's last commit: its offset moved, or a live member owns the
        partition and a commit interval passed (it commits on that interval whether or not the offset moved)."""
        if not window.commits or window.commits[-1].offset != seen.committed:
            return True
        if seen.write_id is not None and window.write_id is not None:
            return seen.write_id != window.write_id  # the store says whether a commit happened
        return seen.owned and now_ms - window.commits[-1].timestamp_ms >= self.config.commit_interval_ms

    def retain(self, group_ids: Iterable[str]) -> None:
        """Forget every group but ``group_ids``: a group deleted and created again starts a new window."""
        kept = set(group_ids)
        self._groups = {g: windows for g, windows in self._groups.items() if g in kept}
        self._on_coordinator &= kept

    def coordinator_groups(self, now_ms: int) -> set[str]:
        """The groups last seen on a coordinator that have not expired (Burrow would still know them)."""
        return {g for g in self._on_coordinator if self.evaluate(g, now_ms).status != GroupStatus.NOTFOUND}

    def evaluate(self, group_id: str, now_ms: int) -> GroupLag:
        windows = self._groups.get(group_id)
        lag = evaluate_group(group_id, windows, now_ms, self.config)
        return replace(lag, uncommitted=True) if windows == {} else lag

    def to_json(self) -> dict:
        return {
            "version": STATE_VERSION,
            "groups": {
                group_id: [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "commits": [[c.offset, c.lag, c.timestamp_ms] for c in window.commits],
                        "log_ends": list(window.log_ends),
                        "write_id": window.write_id,
                    }
                    for tp, window in sorted(windows.items())
                ]
                for group_id, windows in sorted(self._groups.items())
            },
            "coordinator_groups": sorted(self._on_coordinator),
        }

    @classmethod
    def from_json(cls, document: Mapping, config: WindowConfig = BURROW_DEFAULTS) -> LagWindows:
        """Windows saved by :meth:`to_json`; ValueError for a document that is not one."""
        if not isinstance(document, Mapping) or document.get("version") != STATE_VERSION:
            raise ValueError(f"not a lag state of version {STATE_VERSION}")
        windows = cls(config)
        try:
            for group_id, partitions in document["groups"].items():
                windows._groups[group_id] = {
                    TopicPartition(p["topic"], int(p["partition"])): PartitionWindow(
                        tuple(Commit(int(o), int(lag), int(t)) for o, lag, t in p["commits"])[-config.intervals :],
                        tuple(int(end) for end in p["log_ends"])[-config.intervals :],
                        None if p.get("write_id") is None else int(p["write_id"]),
                    )
                    for p in partitions
                }
            windows._on_coordinator = {str(g) for g in document.get("coordinator_groups", ())} & set(windows._groups)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not a lag state: {error!r}") from None
        return windows
