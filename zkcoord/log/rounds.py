"""A ``group``-policy round: the appends waiting for one fsync, packed into as few entries as they fit.

Pure: the :class:`~zkcoord.log.appender.Appender` reserves each append's offsets, and at the round packs the
waiting appends into entries of at most ``message.max.bytes`` and places each one in the active segment.
"""

from collections.abc import Sequence
from typing import NamedTuple

from zkcoord.log.format import encode_entry


class PendingAppend(NamedTuple):
    base_offset: int
    timestamp_ms: int
    records: Sequence[tuple[bytes, bytes | None]]
    size_bound: int  # of the records once encoded, from records_bound


def records_bound(records: Sequence[tuple[bytes, bytes | None]]) -> int:
    """An upper bound of the encoded size of ``records`` in an entry; TypeError unless keys and values are bytes."""
    size = 0
    for key, value in records:
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise TypeError("records are (key bytes, value bytes or None) pairs")
        # [offset_delta (≤ 5 bytes), attributes (1), bin key (≤ 5 + len), bin or nil value (≤ 5 + len)] + array head
        size += len(key) + (len(value) if value is not None else 0) + 17
    return size


def pack_round(pending: list[PendingAppend], budget: int) -> list[list[PendingAppend]]:
    """``pending`` in order, cut into groups whose size bounds add up to at most ``budget`` (or one append)."""
    entries: list[list[PendingAppend]] = []
    entry: list[PendingAppend] = []
    used = 0
    for append in pending:
        if entry and used + append.size_bound > budget:
            entries.append(entry)
            entry, used = [], 0
        entry.append(append)
        used += append.size_bound
    if entry:
        entries.append(entry)
    return entries


def merged_entry(appends: list[PendingAppend]) -> tuple[bytes, int, int, int]:
    """``(entry, base offset, next offset, timestamp ms)``: the appends of a group encoded as one entry."""
    base_offset = appends[0].base_offset
    records = [
        (append.base_offset - base_offset + index, 0, key, value)
        for append in appends
        for index, (key, value) in enumerate(append.records)
    ]
    # One timestamp per entry: the newest, so no tombstone in it is dropped before its own retention.
    timestamp_ms = max(append.timestamp_ms for append in appends)
    entry = encode_entry(base_offset, timestamp_ms, records)
    return entry, base_offset, base_offset + records[-1][0] + 1, timestamp_ms
