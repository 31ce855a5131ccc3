"""The durable log writer: the offsets partitions a node leads, in the shared log directory, fenced by epoch.

Implements :class:`~zkcoord.runtime.logs.LogWriter` over one :class:`~zkcoord.log.partition.PartitionLog` per
partition. An append is handed to the log without waiting (:meth:`PartitionLog.submit`): under the ``group``
flush policy one :class:`~zkcoord.log.syncer.RoundSyncer` serves every open partition, and calls back every
append of a round after the round's fsyncs (one per partition with appends, side by side), so a thousand
commits in flight cost no greenlet each. A :class:`~zkcoord.log.cleaner.BackgroundCleaner` compacts the open
partitions once the node starts it. Opening a partition claims its directory for the leader epoch
(a deposed leader's later writes are refused on disk) and replays it.

IO: files and gevent (through the log). Must not import the group core or the server.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from zkcoord.errors import ErrorCode, LogError
from zkcoord.log.cleaner import BackgroundCleaner
from zkcoord.log.config import LogConfig
from zkcoord.log.fence import EpochFence
from zkcoord.log.loader import load_partition
from zkcoord.log.partition import PartitionLog
from zkcoord.log.syncer import RoundSyncer
from zkcoord.offsets.records import encode_record
from zkcoord.offsets.store import OffsetStore
from zkcoord.runtime.logs import AppendDone, Records

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def partition_directory(log_dir: str | Path, partition: int) -> Path:
    """Where offsets partition ``partition`` lives in the shared log directory (Kafka's naming)."""
    return Path(log_dir) / f"{OFFSETS_TOPIC}-{partition}"


class DurableLogs:
    """The partitions this node has open, by offsets partition."""

    def __init__(self, log_dir: str | Path, config: LogConfig, clock):
        self.log_dir = Path(log_dir)
        self.config = config
        self.clock = clock
        self.open_logs: dict[int, PartitionLog] = {}
        self.syncer = RoundSyncer()
        self.cleaner = BackgroundCleaner(clock, backoff_ms=config.cleaner_backoff_ms)

    def start_cleaner(self) -> None:
        """Compact the open partitions in the background (``log.cleaner.*``), unless ``log.cleaner.enable`` is off."""
        if self.config.cleaner_enable:
            self.cleaner.start()

    def stop_cleaner(self) -> None:
        self.cleaner.stop()

    def append(self, partition: int, records: Records, timestamp_ms: int, done: AppendDone) -> None:
        partition_log = self.open_logs.get(partition)
        if partition_log is None or partition_log.closed:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
            return

        def written(error: LogError | None, base_offset: int) -> None:
            if error is not None:
                log.warning("append failed partition=%d error=%s: %s", partition, error.error_code.name, error)
                done(error.error_code, base_offset)
            else:
                done(None, base_offset)

        partition_log.submit([encode_record(key, value) for key, value in records], timestamp_ms, written)

    def open(self, partition: int, epoch: int | None) -> OffsetStore:
        """Claim ``partition``'s directory for ``epoch`` and replay it; FencedLeaderError if a newer epoch has."""
        self.close(partition)  # left open by a load the core failed after the log replayed: it is loaded anew
        started = time.monotonic()
        directory = partition_directory(self.log_dir, partition)
        fence = None if epoch is None else EpochFence(directory, epoch)
        partition_log = PartitionLog.open(directory, self.config, self.clock, fence=fence, syncer=self.syncer)
        try:
            result = load_partition(partition_log)
        except BaseException:
            partition_log.close()
            raise
        self.open_logs[partition] = partition_log
        self.cleaner.add(partition_log)
        log.info(
            "replayed partition=%d epoch=%s records=%d bytes=%d in %.0f ms",
            partition,
            epoch,
            result.records,
            result.bytes,
            (time.monotonic() - started) * 1000,
        )
        return result.store

    def close(self, partition: int) -> None:
        partition_log = self.open_logs.pop(partition, None)
        if partition_log is None:
            return
        self.cleaner.remove(partition_log)
        try:
            partition_log.flush()
        except LogError as exc:
            log.warning("flush on resignation failed partition=%d: %s", partition, exc)
        partition_log.close()

    def fsync_count(self) -> int:
        return sum(partition_log.fsync_count for partition_log in list(self.open_logs.values()))
