"""A legacy member's offset commits and fetches: where, when, and with what retries (legacy-zk-protocol.md §5).

Where is the offsets mode (:mod:`zkcoord.legacy.offsets`): ZooKeeper's offset znodes, the coordinator's offsets
log, or both; the group's migration phase, watched from startup, wins over ``offsets.storage`` and
``dual.commit.enabled``. A state znode holding foreign data fails closed: the member keeps the mode it followed,
or, with none yet, neither commits nor fetches. When: ``commit()``, auto-commit every interval (never during a
rebalance), before a rebalance releases, after a failed attempt with auto-commit on, and at shutdown with
``offsets.commit.max.retries`` retries. ZooKeeper gets the positions that moved since their checkpoint; the
log gets every position (KAFKA-1510). Fetches follow the mode's read rule, after the claim.

Runs on the member's hub thread. IO: the kazoo client of its context and the :class:`LogOffsets` it is given
(gevent sockets on the same hub). Does not import the rebalance, membership or consumer modules.
"""

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence

import gevent
import gevent.lock
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from zkcoord.errors import CommitFailedError, ZkcoordError, error_name
from zkcoord.legacy.context import MemberContext, MemberPart
from zkcoord.legacy.offsets import LogOffsets, LogUnavailableError, OffsetsMode, mode_for
from zkcoord.legacy.ownership import ZkOps
from zkcoord.legacy.stream import Owned
from zkcoord.migration.phases import LOG, ZK, MigrationState, MigrationStateError, read_offset
from zkcoord.model import TopicPartition
from zkcoord.zk import layout

log = logging.getLogger(__name__)


class OffsetCommits(MemberPart):
    """The member's offsets mode, and its commits and fetches under that mode."""

    def __init__(self, context: MemberContext, log_offsets: LogOffsets):
        super().__init__(context)
        self.mode: OffsetsMode | None = None  # set by the migration-state watch at startup
        self.unreadable: str | None = None  # why the group's migration state cannot be read now, if it cannot
        self._log = log_offsets
        # Held by every commit, fetch and advertisement write: the log channel serves one request at a
        # time, and a new mode is advertised only once no commit or fetch of the old one is under way.
        self._lock = gevent.lock.Semaphore()

    # ---- the offsets mode ----------------------------------------------------------------------------

    def follow(self, state: MigrationState | None) -> bool:
        """Switch to the mode the group's migration state (or the config, without one) says, at once, so the
        next commit or fetch follows it. True if the mode changed: its advertisement is then due."""
        mode = mode_for(self._config.offsets_storage, self._config.dual_commit, state)
        previous = self.mode
        if self.unreadable is not None:
            self.unreadable = None
            log.info("migration state readable again member=%s", self._consumer_id)
        if mode == previous:
            return False
        self.mode = mode
        if previous is not None and mode.rule != previous.rule:
            # ZooKeeper may have moved while this member did not write it (the coordinator's mirror, a copy
            # step): the next ZooKeeper write covers every position.
            for owned in self._ownership.registry.values():
                owned.checkpointed = None
        log.info(
            "offsets mode member=%s: follows %s%s",
            self._consumer_id,
            mode.describe(),
            "" if previous is None else f" (was {previous.describe()})",
        )
        self._trace.emit("legacy.offsets_mode", **mode.trace_fields())
        return True

    def keep_mode(self, error: MigrationStateError) -> None:
        """The group's migration znode holds foreign data: fail closed. Falling back to the config could take
        a group at LOG_ONLY to ZooKeeper only (acknowledged commits the log never sees, then older offsets read
        back from the log), so the member keeps the mode it follows and advertises no new epoch; with no mode
        yet, commits and fetches fail until the znode reads again (the watch brings the repair at once)."""
        self.unreadable = str(error)
        if self.mode is None:
            log.error(
                "unreadable migration state member=%s: %s; no offset commit or fetch until it reads again",
                self._consumer_id,
                error,
            )
        else:
            log.warning(
                "unreadable migration state member=%s: %s; keeps following %s until it reads again",
                self._consumer_id,
                error,
                self.mode.describe(),
            )

    def _mode_in_force(self, failure: type[ZkcoordError]) -> OffsetsMode:
        """The mode to commit or fetch under; ``failure`` when there is none (the state was never readable)."""
        if self.mode is None:
            raise failure(
                f"no offsets mode to follow: the group's migration state cannot be read ({self.unreadable}); "
                "nothing is committed or fetched until it reads again"
            )
        return self.mode

    @contextlib.contextmanager
    def settled_mode(self) -> Iterator[OffsetsMode | None]:
        """The mode in force (None: none yet), with no commit or fetch under way until the block ends (for
        its advertisement)."""
        with self._lock:
            yield self.mode

    def describe_group(self) -> tuple[str, list[str]]:
        """The group's state and members at its coordinator; raises :class:`LogUnavailableError`."""
        with self._lock:
            return self._log.describe()

    def close(self) -> None:
        self._log.close()

    # ---- fetches -------------------------------------------------------------------------------------

    def fetch(self, partitions: Sequence[TopicPartition], ops: ZkOps) -> dict[TopicPartition, tuple[int, int | None]]:
        """``(offset to start from, ZooKeeper's offset if it was read)`` per partition, as the read rule says:
        ZooKeeper, the log, or the larger of both (§5.2)."""
        with self._lock:
            reads = self._mode_in_force(ZkcoordError).reads
            zk = self._read_zk_offsets(partitions, ops) if reads != LOG else {}
            logged = self._fetch_log_offsets(partitions) if reads != ZK else {}
        return {tp: (read_offset(reads, zk.get(tp), logged.get(tp)), zk.get(tp)) for tp in partitions}

    def committed(self, partition: TopicPartition) -> int | None:
        """The committed offset as the read rule sees it; None when there is none."""
        with self._lock:
            reads = self._mode_in_force(ZkcoordError).reads
            zk = self._read_zk_offsets([partition], ZkOps())[partition] if reads != LOG else None
            logged = self._log.fetch([partition])[partition] if reads != ZK else None
        offset = read_offset(reads, zk, logged)
        return None if offset < 0 else offset

    def _read_zk_offsets(self, partitions: Sequence[TopicPartition], ops: ZkOps) -> dict[TopicPartition, int]:
        pending = {tp: self._zk.get_async(layout.offset_path(self._group, *tp)) for tp in partitions}
        ops.add(len(pending))
        offsets = {}
        for tp, result in pending.items():
            try:
                offsets[tp] = layout.decode_offset(layout.offset_path(self._group, *tp), result.get()[0])
            except NoNodeError:
                offsets[tp] = -1
        return offsets

    def _fetch_log_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetFetch until it succeeds; shutdown, a new session or a new offsets mode (which may not read the
        log at all) ends the attempt instead (§5.2)."""
        mode = self.mode
        while True:
            try:
                return self._log.fetch(partitions)
            except LogUnavailableError as error:
                problem = error
            if self.mode != mode:
                raise ZkcoordError(f"the offsets mode changed while the log did not answer; {problem}")
            if not self._stopping.is_set() and not self._lifecycle.superseded:
                log.warning(
                    "offset fetch from the log failed member=%s error=%s; retrying in %d ms",
                    self._consumer_id,
                    problem,
                    self._config.offsets_channel_backoff_ms,
                )
                self._stopping.wait(self._config.offsets_channel_backoff_ms / 1000.0)
            if self._stopping.is_set() or self._lifecycle.superseded:
                raise ZkcoordError(
                    f"offset fetch from the log given up: the member is closing or re-registering; {problem}"
                )

    # ---- commits -------------------------------------------------------------------------------------

    def commit(self, ops: ZkOps) -> None:
        """Commit the registry's positions where the mode in force says (§5.1); raises if the try failed.

        ZooKeeper only: positions that differ from the checkpoint. With the log: every position (KAFKA-1510),
        then, with dual commit, ZooKeeper for the changed ones the log accepted. A partition without a
        position (-1: nothing committed, nothing consumed yet) is not committed anywhere.
        """
        with self._lock:
            mode = self._mode_in_force(CommitFailedError)
            positions = {
                tp: (owned, owned.position) for tp, owned in self._ownership.registry.items() if owned.position >= 0
            }
            if not mode.writes_log:
                self._write_checkpointed(positions, ops)
                return
            if not positions:
                return
            try:
                codes = self._log.commit({tp: position for tp, (_, position) in positions.items()})
            except (KazooException, ZkcoordError) as error:
                self._trace_failed("log", error)
                raise CommitFailedError(f"offset commit to the log failed: {error}") from error
            self._trace_committed("log", {tp: positions[tp][1] for tp, code in codes.items() if code == 0})
            if mode.writes_zk:
                accepted = {tp: positions[tp] for tp, code in codes.items() if code == 0}
                try:
                    self._write_checkpointed(accepted, ops)
                except KazooException as error:
                    raise CommitFailedError(
                        f"offsets accepted by the log but not written to ZooKeeper: {error}"
                    ) from error
            refused = {tp: code for tp, code in codes.items() if code}
            if refused:
                error = CommitFailedError(
                    f"the log refused offsets of {len(refused)} partition(s): "
                    + ", ".join(f"{tp.topic}-{tp.partition} {error_name(code)}" for tp, code in sorted(refused.items()))
                )
                self._trace_failed("log", error)
                raise error

    def commit_quietly(self) -> bool:
        """One commit try that logs a failure instead of raising (auto-commit makes one try, §5.1)."""
        try:
            self.commit(ZkOps())
            return True
        except (KazooException, ZkcoordError) as error:
            log.warning("offset commit failed member=%s error=%s", self._consumer_id, error)
            return False

    def commit_before_release(self, ops: ZkOps) -> None:
        """ZooKeeper errors fail the attempt, as in 0.8.2; a failed commit to the log is logged and the release
        goes on, as 0.8.2's ``commitOffsets`` returns without throwing (the next owner may repeat records)."""
        try:
            self.commit(ops)
        except CommitFailedError as error:
            log.warning("offset commit before release failed member=%s error=%s", self._consumer_id, error)

    def commit_with_retries(self) -> None:
        """At shutdown a commit is retried ``offsets.commit.max.retries`` times (§5.1)."""
        for attempt in range(1 + self._config.offsets_commit_max_retries):
            if attempt:
                gevent.sleep(self._config.offsets_channel_backoff_ms / 1000.0)
            if self.commit_quietly():
                return

    def auto_commit_loop(self, rebalance_lock: gevent.lock.Semaphore) -> None:
        """``auto.commit.enable``: one quiet try every ``auto.commit.interval.ms`` until the member closes."""
        interval = self._config.auto_commit_interval_ms / 1000.0
        while not self._stopping.wait(interval):
            # Not during a rebalance: a log commit waits on the network, and one that landed after the
            # release could overwrite what the partition's next owner committed meanwhile.
            with rebalance_lock:
                self.commit_quietly()

    def _write_checkpointed(self, positions: Mapping[TopicPartition, tuple[Owned, int]], ops: ZkOps) -> None:
        """Write to ZooKeeper the positions that differ from their checkpoint, then move the checkpoint."""
        changed = {
            tp: (owned, position) for tp, (owned, position) in positions.items() if position != owned.checkpointed
        }
        if not changed:
            return
        try:
            self._write_offsets({tp: position for tp, (_, position) in changed.items()}, ops)
        except KazooException as error:
            self._trace_failed("zookeeper", error)
            raise
        for owned, position in changed.values():
            owned.checkpointed = position
        self._trace_committed("zookeeper", {tp: position for tp, (_, position) in changed.items()})

    def _trace_committed(self, store: str, offsets: Mapping[TopicPartition, int]) -> None:
        if offsets:  # a log commit it refused whole wrote nothing: its failure is traced instead
            self._trace.emit(
                "legacy.committed", store=store, offsets=[[*tp, offset] for tp, offset in sorted(offsets.items())]
            )

    def _trace_failed(self, store: str, error: Exception) -> None:
        self._trace.emit("legacy.commit_failed", store=store, error=f"{type(error).__name__}: {error}")

    def _write_offsets(self, offsets: Mapping[TopicPartition, int], ops: ZkOps) -> None:
        """``updatePersistentPath``, pipelined: set; create the missing; set again on a create race."""
        paths = {tp: layout.offset_path(self._group, *tp) for tp in offsets}
        sets = {tp: self._zk.set_async(paths[tp], layout.encode_offset(o)) for tp, o in offsets.items()}
        ops.add(len(sets))
        missing = []
        for tp, result in sets.items():
            try:
                result.get()
            except NoNodeError:
                # Create only for partitions still owned: a partition released meanwhile may have a new
                # owner that already read "no offset", and a late create would slip under it.
                if tp in self._ownership.registry:
                    missing.append(tp)
        creates = {
            tp: self._zk.create_async(paths[tp], layout.encode_offset(offsets[tp]), makepath=True) for tp in missing
        }
        ops.add(len(creates))
        for tp, result in creates.items():
            try:
                result.get()
            except NodeExistsError:
                self._zk.set(paths[tp], layout.encode_offset(offsets[tp]))
                ops.add(1)
