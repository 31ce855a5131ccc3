"""One segment of a partition: a ``.log`` file of entries and its sparse ``.index``.

A segment is named by the offset of its first record (``00000000000000000042.log``). The index holds
``(relative offset, byte position)`` pairs, big-endian uint32 each, one per ``log.index.interval.bytes``
of entries; a read from an offset starts at the last indexed entry at or before it.

Owns file descriptors; must not import gevent (the partition log decides where blocking calls run).
"""

import bisect
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcoord.log.format import HEADER_SIZE, MAGIC, Batch, LogFormatError, decode_entry, read_length

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_INDEX_ENTRY = struct.Struct(">II")
_HEADER_OFFSETS = struct.Struct(">10xqq")  # base_offset, timestamp_ms after length/crc/magic/attributes
_NAME_DIGITS = 20
_MAX_RELATIVE = 1 << 32  # index entries hold offsets relative to the segment's base as uint32
TEMPORARY_SUFFIX = ".tmp"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{_NAME_DIGITS}d}{LOG_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The base offset a segment file name stands for, or None for any other file."""
    stem, suffix = name[: -len(LOG_SUFFIX)], name[-len(LOG_SUFFIX) :]
    if suffix != LOG_SUFFIX or len(stem) != _NAME_DIGITS or not stem.isdigit():
        return None
    return int(stem)


def fsync_directory(path: Path) -> None:
    """Make created, renamed and deleted names in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ScanProblem:
    """Where a segment stops being valid, and why."""

    path: Path
    position: int
    offset: int
    reason: str
    torn: bool

    @classmethod
    def of(cls, error: LogFormatError, path: Path, offset: int) -> "ScanProblem":
        """The problem ``error`` found in ``path``, where ``offset`` was the next offset expected."""
        return cls(path, error.position, offset, error.reason, error.torn)

    def __str__(self) -> str:
        kind = "torn entry" if self.torn else "corrupt entry"
        return f"{self.path}: {kind} at byte {self.position} (offset {self.offset}): {self.reason}"


def read_batches(fd: int, start: int, end: int, max_entry_bytes: int, chunk_bytes: int) -> Iterator[Batch]:
    """Decode the entries of ``fd`` in ``[start, end)``; a bad one raises LogFormatError with its file position."""
    position = start
    while position < end:
        want = min(chunk_bytes, end - position)
        buffer = os.pread(fd, want, position)
        whole = read_length(buffer, 0)
        if want < whole <= min(max_entry_bytes, end - position):  # one entry larger than a chunk
            buffer = os.pread(fd, whole, position)
        view = memoryview(buffer)
        cursor = 0
        while cursor < len(buffer):
            size = read_length(view, cursor)
            if cursor and (size < 0 or cursor + size > len(buffer)):
                break  # the rest of the chunk starts the next read
            try:
                batch = decode_entry(view, cursor, max_entry_bytes)
            except LogFormatError as exc:
                raise LogFormatError(exc.reason, position + cursor, exc.torn) from None
            yield batch
            cursor += size
        position += cursor


def check_batches(
    fd: int, base_offset: int, end: int, max_entry_bytes: int, chunk_bytes: int
) -> Iterator[tuple[int, Batch]]:
    """``(position, batch)`` for each entry of a whole segment, also checking that offsets only go forward."""
    position, next_offset = 0, base_offset
    for batch in read_batches(fd, 0, end, max_entry_bytes, chunk_bytes):
        if batch.base_offset < next_offset:
            raise LogFormatError(f"offset {batch.base_offset} goes back (expected ≥ {next_offset})", position)
        yield position, batch
        position += batch.size
        next_offset = batch.next_offset


_MAGIC_AND_ATTRIBUTES = bytes([MAGIC, 0])
_MAGIC_POSITION = 8  # after length and crc


def find_valid_entry(
    fd: int, start: int, end: int, min_offset: int, max_entry_bytes: int, chunk_bytes: int
) -> tuple[int, int] | None:
    """``(position, base_offset)`` of the first entry in ``fd``'s ``[start, end)`` that verifies (length, checksum,
    records) and whose base offset is at least ``min_offset``; None if there is none.

    Every byte position is a candidate, so an entry is found behind damage of any kind, also in a length
    field. Only positions whose magic and attribute bytes are right are decoded.
    """
    window = start
    while window < end:
        buffer = os.pread(fd, min(chunk_bytes + max_entry_bytes, end - window), window)
        limit = min(chunk_bytes, len(buffer))
        marker = buffer.find(_MAGIC_AND_ATTRIBUTES, _MAGIC_POSITION)
        while 0 <= marker - _MAGIC_POSITION < limit:
            candidate = marker - _MAGIC_POSITION
            try:
                batch = decode_entry(buffer, candidate, max_entry_bytes)
            except LogFormatError:
                pass
            else:
                if batch.base_offset >= min_offset:
                    return window + candidate, batch.base_offset
            marker = buffer.find(_MAGIC_AND_ATTRIBUTES, marker + 1)
        window += chunk_bytes
    return None


class Segment:
    """An open segment file. ``size`` is the length of its valid entries; ``next_offset`` follows the last."""

    def __init__(self, path: Path, base_offset: int, writable: bool, index_interval: int):
        self.path = path
        self.base_offset = base_offset
        self.index_path = path.with_suffix(INDEX_SUFFIX)
        self.index_interval = index_interval
        self.fd = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.written_size = self.size
        self._unwritten: list[bytes] = []
        self.next_offset = base_offset
        self.first_timestamp_ms: int | None = None
        self.index_offsets: list[int] = []
        self.index_positions: list[int] = []
        self._bytes_since_index = 0

    # -- reading ------------------------------------------------------------------------------------

    def scan(self, max_entry_bytes: int, chunk_bytes: int) -> tuple[int, int, ScanProblem | None]:
        """Validate every entry: ``(valid_size, next_offset, problem)``, rebuilding the in-memory index."""
        self._clear_index()
        self.first_timestamp_ms = None
        position, next_offset = 0, self.base_offset
        try:
            for position, batch in check_batches(self.fd, self.base_offset, self.size, max_entry_bytes, chunk_bytes):
                self._index(batch.base_offset, position, batch.size)
                if self.first_timestamp_ms is None:
                    self.first_timestamp_ms = batch.timestamp_ms
                next_offset = batch.next_offset
        except LogFormatError as exc:
            return exc.position, next_offset, ScanProblem.of(exc, self.path, next_offset)
        return self.size, next_offset, None

    # -- the index ----------------------------------------------------------------------------------

    def load_index(self) -> bool:
        """Read the ``.index`` file; False (and an empty index) when it is missing or not believable."""
        try:
            data = self.index_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % _INDEX_ENTRY.size:
            return False
        pairs = list(_INDEX_ENTRY.iter_unpack(data))
        offsets = [self.base_offset + relative for relative, _ in pairs]
        positions = [position for _, position in pairs]
        increasing = all(a < b for a, b in zip(offsets, offsets[1:], strict=False)) and all(
            a < b for a, b in zip(positions, positions[1:], strict=False)
        )
        if not increasing or (positions and (positions[0] != 0 or positions[-1] >= self.size)):
            return False
        self.index_offsets, self.index_positions = offsets, positions
        return True

    def rebuild_index_from_headers(self) -> None:
        """Index an older segment by hopping from header to header (no record is decoded).

        Headers are not checksummed here, so indexing stops at the first implausible one: the read that
        reaches it reports the corruption (CorruptLogError) instead of a wrong index hiding it.
        """
        self._clear_index()
        position, previous = 0, self.base_offset - 1
        while position + HEADER_SIZE <= self.size:
            header = os.pread(self.fd, HEADER_SIZE, position)
            base_offset, _ = _HEADER_OFFSETS.unpack_from(header)
            size = read_length(header, 0)
            implausible = size < HEADER_SIZE or position + size > self.size
            if implausible or not previous < base_offset < self.base_offset + _MAX_RELATIVE:
                break
            self._index(base_offset, position, size)
            position, previous = position + size, base_offset

    def _clear_index(self) -> None:
        self.index_offsets, self.index_positions = [], []
        self._bytes_since_index = 0

    def _index(self, base_offset: int, position: int, size: int) -> None:
        """Index the entry at ``position`` if it is the first or ``log.index.interval.bytes`` have passed."""
        if not self.index_offsets or self._bytes_since_index >= self.index_interval:
            self.index_offsets.append(base_offset)
            self.index_positions.append(position)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def write_index_file(self) -> None:
        """Replace the ``.index`` file with the in-memory index and make it durable."""
        temporary = self.index_path.with_name(self.index_path.name + TEMPORARY_SUFFIX)
        data = b"".join(
            _INDEX_ENTRY.pack(offset - self.base_offset, position)
            for offset, position in zip(self.index_offsets, self.index_positions, strict=True)
        )
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.index_path)

    def position_for(self, offset: int) -> int:
        """Byte position of the last indexed entry whose base offset is ≤ ``offset`` (0 if none)."""
        slot = bisect.bisect_right(self.index_offsets, offset) - 1
        return self.index_positions[slot] if slot >= 0 else 0

    # -- writing (active segment only) --------------------------------------------------------------

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.size = self.written_size = size

    def append(self, entry: bytes, base_offset: int, next_offset: int, timestamp_ms: int) -> None:
        """Buffer one encoded entry at the end and index it; :meth:`write_out` puts it in the file."""
        self._index(base_offset, self.size, len(entry))
        self._unwritten.append(entry)
        if self.first_timestamp_ms is None:
            self.first_timestamp_ms = timestamp_ms
        self.size += len(entry)
        self.next_offset = next_offset

    def write_out(self) -> None:
        """Write the buffered entries with one system call (no fsync)."""
        if not self._unwritten:
            return
        data = b"".join(self._unwritten) if len(self._unwritten) > 1 else self._unwritten[0]
        self._unwritten = []
        written = os.pwrite(self.fd, data, self.written_size)
        if written != len(data):
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        self.written_size += written

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def partition_directories(path: str | os.PathLike, markers: tuple[str, ...] = ()) -> list[Path]:
    """``path`` itself if it holds segments (or a file named in ``markers``), else each child directory that does
    (sorted)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")

    def is_partition(directory: Path) -> bool:
        return any(parse_segment_name(name) is not None or name in markers for name in os.listdir(directory))

    if is_partition(root):
        return [root]
    return sorted(child for child in root.iterdir() if child.is_dir() and is_partition(child))
