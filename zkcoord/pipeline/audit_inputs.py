"""The offsets audit's two inputs as rows (see :mod:`zkcoord.pipeline.offsets_audit`): the log's segment files,
listed on the driver and decoded on the executors, and the ZooKeeper export's lines, parsed on the executors.

Each task decodes its segments with the log's own reader (``zkcoord.log.segment``) and record codec
(``zkcoord.offsets.records``); what it cannot take as it is becomes a problem row, never an exception.
IO: reads the files only. Plain Python (pyspark only inside :func:`schemas`), so that the executors import
little; must not import gevent, kazoo, the runtime or the server.
"""

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcoord.log import config as _log_config
from zkcoord.log import format as _log_format
from zkcoord.log import segment as _segment
from zkcoord.log import swap as _swap
from zkcoord.offsets.records import OffsetCommitKey, RecordError, decode_key, decode_offset_commit, decode_value
from zkcoord.zk.layout import ZnodeDecodeError, decode_offset, parse_offset_path

EXPORT_LINE = "/consumers/<group>/offsets/<topic>/<partition>:<offset>"
_INT32_MAX = 2**31 - 1

TORN_TAIL = "torn tail"
CORRUPT_TAIL = "corrupt tail"
CORRUPT_SEGMENT = "corrupt segment"
UNREADABLE_SEGMENT = "unreadable segment"
UNREADABLE_PARTITION = "unreadable partition"
UNDECODABLE_RECORD = "undecodable record"
SEVERAL_LOG_PARTITIONS = "several log partitions"
CUT_ON_OPEN = (TORN_TAIL, CORRUPT_TAIL)
"""Problems that fail no audit: opening the log cuts the newest segment there, so no reader sees past them."""


class AuditInputError(ValueError):
    """The export file or the log directory is missing, or the log directory holds no partition."""


@dataclass(frozen=True)
class LogProblem:
    """Log data not taken as it is, by kind (:data:`CORRUPT_SEGMENT`, ...), with where and why."""

    kind: str
    log_partition: str
    detail: str


@dataclass(frozen=True)
class MalformedLine:
    """An export line left out: its number (from 1), why, and its text (cut at 120 characters)."""

    line: int
    reason: str
    text: str


# ---- the driver -----------------------------------------------------------------------------------------------


def check_inputs(zk_snapshot: str | os.PathLike, log_dir: str | os.PathLike) -> list[Path]:
    """The log's partition directories, found as ``zkcoord log`` finds them; AuditInputError for bad input."""
    if not Path(zk_snapshot).is_file():
        raise AuditInputError(f"--zk-snapshot {zk_snapshot}: no such file")
    if not Path(log_dir).is_dir():
        raise AuditInputError(f"--log-dir {log_dir}: no such directory")
    found = _segment.partition_directories(log_dir)
    if not found:
        raise AuditInputError(f"--log-dir {log_dir} holds no offsets-log partition (no *.log segment files)")
    return found


def segment_tasks(partitions: Iterable[Path]) -> tuple[list[tuple[str, int, str, bool]], list[LogProblem]]:
    """``(log partition, base offset, absolute path, is the newest)`` of every segment, as a reader sees them.

    A committed compaction counts as finished (``swap.visible_segments``), as opening the log would make it.
    """
    tasks, problems = [], []
    for directory in partitions:
        try:
            segments = _swap.visible_segments(directory)
        except (OSError, ValueError) as error:
            problems.append(LogProblem(UNREADABLE_PARTITION, directory.name, str(error)))
            continue
        newest = max(segments, default=None)
        tasks += [(directory.name, base, str(path.resolve()), base == newest) for base, path in segments.items()]
    return tasks, problems


# ---- executors: pure Python over one task's share of the input ------------------------------------------------


def decode_segments(tasks: Iterable[tuple[str, int, str, bool]]) -> Iterator[tuple]:
    """Rows of the decoded schema (:func:`schemas`): one per offset commit record, one per problem."""
    config = _log_config.LogConfig()  # what `zkcoord log load` reads with
    for log_partition, base, path, newest in tasks:
        yield from _segment_rows(log_partition, base, path, newest, config)


def _segment_rows(log_partition: str, base: int, path: str, newest: bool, config) -> Iterator[tuple]:
    index = 0
    next_offset = base

    def problem(kind: str, detail: str) -> tuple:
        return (log_partition, base, index, None, None, None, None, None, kind, detail)

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        yield problem(UNREADABLE_SEGMENT, f"{path}: {error}")
        return
    try:
        size = os.fstat(fd).st_size
        limits = (config.max_message_bytes, config.load_buffer_bytes)
        # As the log reads: recovery checks the newest segment entry by entry (offsets must also go forward)
        # and cuts it at the first bad entry; older segments are read as they are.
        if newest:
            batches = (batch for _, batch in _segment.check_batches(fd, base, size, *limits))
        else:
            batches = _segment.read_batches(fd, 0, size, *limits)
        for batch in batches:
            next_offset = batch.next_offset
            for offset, key, value in batch.entries():
                try:
                    commit = _offset_commit(key, value, offset)
                except RecordError as error:
                    yield problem(UNDECODABLE_RECORD, f"{path}: {error}")
                else:
                    if commit is not None:
                        yield (log_partition, base, index, *commit, None, None)
                index += 1
    except _log_format.LogFormatError as error:
        scan_problem = _segment.ScanProblem.of(error, Path(path), next_offset)
        kind = (TORN_TAIL if scan_problem.torn else CORRUPT_TAIL) if newest else CORRUPT_SEGMENT
        yield problem(kind, str(scan_problem))
    except OSError as error:
        yield problem(UNREADABLE_SEGMENT, f"{path}: {error}")
    finally:
        os.close(fd)


def _offset_commit(key: bytes, value: bytes | None, offset: int) -> tuple | None:
    """``(group, topic, partition, offset, commit timestamp)``, the last two None for a tombstone.

    None for a group metadata record; RecordError for a record that does not decode.
    """
    commit = decode_offset_commit(key, value)
    if commit is None:
        record_key = decode_key(key, offset)
        if type(record_key) is not OffsetCommitKey:
            return None
        commit = (*record_key, decode_value(record_key, value, offset))
    group, topic, partition, committed = commit
    if committed is None:
        return (group, topic, partition, None, None)
    return (group, topic, partition, committed.offset, committed.commit_timestamp)


def parse_export_lines(numbered_lines: Iterable[tuple[str, int]]) -> Iterator[tuple]:
    """Rows of the export schema (:func:`schemas`) for ``(text, line index from 0)``; blank lines give none."""
    for text, index in numbered_lines:
        line = text.strip()
        if not line:
            continue
        path, separator, offset_text = line.rpartition(":")
        location = parse_offset_path(path) if separator else None
        if location is None:
            yield _malformed(index, f"expected {EXPORT_LINE}", line)
            continue
        if location[2] > _INT32_MAX:
            yield _malformed(index, f"partition {location[2]} is not an int32", line)
            continue
        try:
            offset = decode_offset(path, offset_text.encode())
        except ZnodeDecodeError:
            yield _malformed(index, f"offset {offset_text!r} is not a 64-bit integer", line)
            continue
        yield (index + 1, *location, offset, None, None)


def _malformed(index: int, reason: str, line: str) -> tuple:
    return (index + 1, None, None, None, None, reason, line[:120])


# ---- their Spark schemas -------------------------------------------------------------------------------------


def schemas():
    """The Spark schemas of :func:`decode_segments`' rows and of :func:`parse_export_lines`' rows."""
    from pyspark.sql import types as T

    decoded = T.StructType(
        [
            T.StructField("log_partition", T.StringType(), False),
            T.StructField("segment_base", T.LongType(), False),
            T.StructField("record_index", T.LongType(), False),  # the record's place in its segment
            T.StructField("group", T.StringType()),
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),  # None: a tombstone
            T.StructField("commit_timestamp", T.LongType()),
            T.StructField("problem_kind", T.StringType()),
            T.StructField("problem", T.StringType()),
        ]
    )
    export = T.StructType(
        [
            T.StructField("line", T.LongType(), False),
            T.StructField("group", T.StringType()),
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            T.StructField("malformed", T.StringType()),
            T.StructField("text", T.StringType()),
        ]
    )
    return decoded, export
