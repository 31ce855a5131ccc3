"""Burrow's consumer lag evaluation (docs/lag.md): per partition a window of commits, five partition statuses and
four group statuses, decided by the rules of Burrow's ``core/internal/evaluator/caching.go``.

Pure: plain data and ``now_ms``; no IO, no clock. Must not import anything of zkcoord but ``model``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from zkcoord.model import TopicPartition


class PartitionStatus(enum.IntEnum):
    """A partition's status; the order is Burrow's (``protocol.StatusConstant``), worst last."""

    OK = 1
    WARN = 2
    STOP = 4
    STALL = 5
    REWIND = 6


class GroupStatus(enum.IntEnum):
    """A group's status: the worst of its partitions', STOP/STALL/REWIND all being ERR."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3


@dataclass(frozen=True)
class WindowConfig:
    """Burrow's storage and evaluator settings, with its defaults: ``intervals`` commits kept per partition (and as
    many log-end offsets), a commit closer than ``min_distance_ms`` to the previous one replaces it, a group whose
    newest commit is older than ``expire_group_ms`` is NOTFOUND (Burrow purges the whole group; a live group's
    windows never lose a commit to age), lag up to ``allowed_lag`` is none. zkcoord's own: a live member whose
    offset did not move is taken to commit every ``commit_interval_ms`` (0.8.2's ``auto.commit.interval.ms``)."""

    intervals: int = 10
    min_distance_ms: int = 0
    expire_group_ms: int = 604_800_000
    allowed_lag: int = 0
    commit_interval_ms: int = 60_000

    def __post_init__(self):
        if (
            self.intervals < 1
            or self.min_distance_ms < 0
            or self.expire_group_ms < 1
            or self.allowed_lag < 0
            or self.commit_interval_ms < 0
        ):
            raise ValueError(f"invalid lag window settings: {self}")


@dataclass(frozen=True)
class Commit:
    """One commit in a partition's window: the offset, the lag behind the log end known when it was seen, and when
    it was committed (or first seen: docs/lag.md)."""

    offset: int
    lag: int
    timestamp_ms: int


@dataclass(frozen=True)
class PartitionWindow:
    """The newest ``intervals`` commits of one partition, oldest first, its newest log-end offsets, the store's
    id of the last write seen of its offset (None: the store has none), and whether the last observation knew the
    log end."""

    commits: tuple[Commit, ...] = ()
    log_ends: tuple[int, ...] = ()
    write_id: int | None = None
    end_known: bool = True

    def with_log_end(self, end: int, config: WindowConfig) -> PartitionWindow:
        return replace(self, log_ends=(*self.log_ends, end)[-config.intervals :])

    def with_commit(self, offset: int, timestamp_ms: int, config: WindowConfig) -> PartitionWindow:
        """Burrow's ``addConsumerOffset``: the lag against the newest log end (0 when the end looks behind); a
        commit within ``min_distance_ms`` of the previous one replaces it and keeps its timestamp."""
        end = self.log_ends[-1] if self.log_ends else offset
        commits = self.commits
        if commits and timestamp_ms - commits[-1].timestamp_ms < config.min_distance_ms:
            timestamp_ms = commits[-1].timestamp_ms
            commits = commits[:-1]
        commit = Commit(offset, max(end - offset, 0), timestamp_ms)
        return replace(self, commits=(*commits, commit)[-config.intervals :])

    def current_lag(self) -> int:
        """The newest log end minus the newest commit (0 when the end looks behind, or nothing is known)."""
        if not self.commits or not self.log_ends:
            return 0
        return max(self.log_ends[-1] - self.commits[-1].offset, 0)


@dataclass(frozen=True)
class PartitionLag:
    """A partition's evaluation: Burrow's ``PartitionStatus`` (``start``/``end``: the window's first and last
    commits; ``complete``: how full the window is)."""

    partition: TopicPartition
    status: PartitionStatus
    current_lag: int
    start: Commit | None
    end: Commit | None
    complete: float
    log_end: int | None


@dataclass(frozen=True)
class GroupLag:
    """A group's evaluation: Burrow's ``ConsumerGroupStatus``; ``uncommitted``: the group exists but has committed
    no offset (NOTFOUND to Burrow, which knows groups by their commits); ``members``: how many it has (None:
    unknown)."""

    group_id: str
    status: GroupStatus
    partitions: tuple[PartitionLag, ...]
    uncommitted: bool = False
    members: int | None = None

    @property
    def total_lag(self) -> int:
        return sum(p.current_lag for p in self.partitions)

    @property
    def max_lag(self) -> PartitionLag | None:
        return max(self.partitions, key=lambda p: p.current_lag, default=None)


def partition_status(window: PartitionWindow, now_ms: int, config: WindowConfig) -> PartitionStatus:
    """Burrow's ``calculatePartitionStatus``: nothing is wrong without current lag; then STOP, REWIND, STALL, WARN,
    in that order, the first that holds. zkcoord's one difference: one commit shows no trend, so it is never STALL
    or WARN (Burrow's rule 4 holds for a single commit); it can be STOP (docs/lag.md)."""
    commits = window.commits
    if not commits or window.current_lag() <= config.allowed_lag:
        return PartitionStatus.OK
    if _stopped(commits, now_ms) and not _recent_lag_zero(commits, window.log_ends):
        return PartitionStatus.STOP
    rewind = _rewind_index(commits)
    if rewind > 0 and not _rewind_recovered(commits, rewind):
        return PartitionStatus.REWIND
    if len(commits) > 1 and all(c.lag > config.allowed_lag for c in commits):
        if all(c.offset == commits[0].offset for c in commits):
            return PartitionStatus.STALL
        if all(later.lag >= earlier.lag for earlier, later in zip(commits, commits[1:], strict=False)):
            return PartitionStatus.WARN
    return PartitionStatus.OK


def group_status(statuses: Iterable[PartitionStatus]) -> GroupStatus:
    """OK, WARN when a partition is WARN, ERR when one is STOP, STALL or REWIND (Burrow's evaluateConsumerStatus)."""
    worst = max(statuses, default=PartitionStatus.OK)
    if worst > PartitionStatus.WARN:
        return GroupStatus.ERR
    return GroupStatus.WARN if worst == PartitionStatus.WARN else GroupStatus.OK


def evaluate_group(
    group_id: str, windows: Mapping[TopicPartition, PartitionWindow] | None, now_ms: int, config: WindowConfig
) -> GroupLag:
    """The group's status and each partition's; NOTFOUND for an unknown group (``windows`` None) or one whose
    newest commit is older than ``expire_group_ms`` (Burrow's lazy purge)."""
    if windows is None or not _alive(windows, now_ms, config):
        return GroupLag(group_id, GroupStatus.NOTFOUND, ())
    partitions = []
    for tp, window in sorted(windows.items()):
        status = partition_status(window, now_ms, config)
        commits = window.commits
        partitions.append(
            PartitionLag(
                tp,
                status,
                window.current_lag(),
                commits[0] if commits else None,
                commits[-1] if commits else None,
                len(commits) / config.intervals,
                window.log_ends[-1] if window.log_ends and window.end_known else None,
            )
        )
    return GroupLag(group_id, group_status(p.status for p in partitions), tuple(partitions))


def _alive(windows: Mapping[TopicPartition, PartitionWindow], now_ms: int, config: WindowConfig) -> bool:
    newest = max((w.commits[-1].timestamp_ms for w in windows.values() if w.commits), default=None)
    return newest is not None and newest >= now_ms - config.expire_group_ms


# Burrow's rules, named as in caching.go.


def _stopped(commits: tuple[Commit, ...], now_ms: int) -> bool:
    """Rule 3: the time since the last commit is longer than the window spans."""
    first, last = commits[0].timestamp_ms, commits[-1].timestamp_ms
    return now_ms - last > last - first


def _recent_lag_zero(commits: tuple[Commit, ...], log_ends: tuple[int, ...]) -> bool:
    """The last commit had reached a log end of the window: the consumer was caught up recently."""
    last = commits[-1].offset
    return any(end <= last for end in log_ends)


def _rewind_index(commits: tuple[Commit, ...]) -> int:
    """Rule 2: the index of the first commit lower than the one before it; -1 for none."""
    return next((i for i in range(1, len(commits)) if commits[i].offset < commits[i - 1].offset), -1)


def _rewind_recovered(commits: tuple[Commit, ...], index: int) -> bool:
    """Rule 2, part 2: a commit from the rewind on got back to the offset before it."""
    return any(c.offset >= commits[index - 1].offset for c in commits[index:])
