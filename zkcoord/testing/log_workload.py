"""A child process for the offsets log's crash tests: it works on a log until the test SIGKILLs it.

tests/integration/test_log_crash.py runs it with ``subprocess`` (``make test`` a sample, ``make soak`` hundreds of
runs), kills it at a random moment, reopens the directory and checks what recovery left::

    python -m zkcoord.testing.log_workload append DIR --policy always|group --appenders N --seed S
    python -m zkcoord.testing.log_workload compact DIR --now-ms T

``append``: N greenlets append deterministic batches (:func:`workload_batch`) forever. After an append
returns, i.e. once its flush policy is met, the greenlet writes ``ack <base_offset> <last_offset>
<digest>`` to stdout with a single write(2), so a line is either whole or absent when the process dies;
``digest`` is :func:`batch_digest` of the records. Everything the parent read an ack for must survive.

``compact``: opens a log the parent prepared (small segments, repeated keys, tombstones), prints
``ready``, then runs :func:`zkcoord.log.cleaner.clean` in a loop, printing ``cleaned`` after each pass,
so the kill lands anywhere in a pass: reading, writing ``*.cleaned`` files, committing or applying the swap.

``--max-seconds`` only guards against an orphaned child: a run that reaches it exits with status 3,
which the tests treat as a failure (they expect death by SIGKILL).
"""

import argparse
import hashlib
import os
import random
import sys
import time
from collections.abc import Sequence

import gevent

from zkcoord.log import LogConfig, PartitionLog
from zkcoord.log.cleaner import clean
from zkcoord.offsets.records import OffsetCommitKey, OffsetCommitValue, decode_key, decode_value, encode_record

GROUPS = ("g0", "g1", "g2")
TOPICS = ("orders", "payments")
PARTITIONS = 4
TOMBSTONE_SHARE = 0.15
EXIT_TIME_LIMIT = 3

Pairs = list[tuple[bytes, bytes | None]]


def workload_batch(seed: int, appender: int, sequence: int) -> Pairs:
    """The ``sequence``-th batch of ``appender``: 1–5 offset-commit records, some of them tombstones.

    The first record is never a tombstone and its metadata is ``a<appender>s<sequence>r0``, so every
    batch is distinct and :func:`batch_origin` can tell which one a batch read back is.
    """
    rnd = random.Random(f"{seed}/{appender}/{sequence}")
    pairs = []
    for index in range(rnd.randint(1, 5)):
        key = OffsetCommitKey(rnd.choice(GROUPS), rnd.choice(TOPICS), rnd.randrange(PARTITIONS))
        if index and rnd.random() < TOMBSTONE_SHARE:
            pairs.append(encode_record(key, None))
        else:
            value = OffsetCommitValue(sequence * 10 + index, f"a{appender}s{sequence}r{index}", rnd.randrange(1 << 40))
            pairs.append(encode_record(key, value))
    return pairs


def batch_origin(pairs: Sequence[tuple[bytes, bytes | None]]) -> tuple[int, int]:
    """``(appender, sequence)`` of a batch made by :func:`workload_batch` (ValueError for anything else)."""
    key_bytes, value_bytes = pairs[0]
    value = decode_value(decode_key(key_bytes), value_bytes)
    if value is None or not value.metadata.startswith("a") or not value.metadata.endswith("r0"):
        raise ValueError(f"not a workload batch: first record {value!r}")
    appender, sequence = value.metadata[1:-2].split("s")
    return int(appender), int(sequence)


def batch_digest(pairs: Sequence[tuple[bytes, bytes | None]]) -> str:
    """SHA-1 of the key and value bytes of each record, length-prefixed; a tombstone hashes unlike any value."""
    digest = hashlib.sha1()
    for key, value in pairs:
        digest.update(len(key).to_bytes(4, "big") + key)
        digest.update(b"\xff\xff\xff\xff" if value is None else len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()


def log_config(policy: str, segment_bytes: int) -> LogConfig:
    """The config both the child and the test open the log with (small segments roll often)."""
    return LogConfig(
        flush_policy=policy,
        segment_bytes=segment_bytes,
        max_message_bytes=min(segment_bytes, LogConfig.max_message_bytes),
        index_interval_bytes=min(segment_bytes, 512),
    )


def _say(line: str) -> None:
    os.write(sys.stdout.fileno(), (line + "\n").encode())  # one write: whole or absent when killed


def run_append(args: argparse.Namespace) -> int:
    log = PartitionLog.open(args.directory, log_config(args.policy, args.segment_bytes))
    deadline = time.monotonic() + args.max_seconds

    def appender(number: int) -> None:
        sequence = 0
        while time.monotonic() < deadline:
            pairs = workload_batch(args.seed, number, sequence)
            result = log.append(pairs)
            _say(f"ack {result.base_offset} {result.last_offset} {batch_digest(pairs)}")
            sequence += 1

    gevent.joinall([gevent.spawn(appender, number) for number in range(args.appenders)], raise_error=True)
    return EXIT_TIME_LIMIT


def run_compact(args: argparse.Namespace) -> int:
    log = PartitionLog.open(args.directory, log_config("always", args.segment_bytes))
    _say("ready")
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        clean(log, args.now_ms, args.delete_retention_ms)
        _say("cleaned")
    return EXIT_TIME_LIMIT


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkcoord.testing.log_workload", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    append = commands.add_parser("append", help="append acknowledged batches until killed")
    append.add_argument("directory")
    append.add_argument("--policy", choices=("always", "group", "never"), required=True)
    append.add_argument("--appenders", type=int, default=4)
    append.add_argument("--seed", type=int, required=True)
    append.add_argument("--segment-bytes", type=int, default=16384)
    compact = commands.add_parser("compact", help="compact a prepared log in a loop until killed")
    compact.add_argument("directory")
    compact.add_argument("--now-ms", type=int, required=True)
    compact.add_argument("--segment-bytes", type=int, default=2048)
    compact.add_argument("--delete-retention-ms", type=int, default=None)
    for command in (append, compact):
        command.add_argument("--max-seconds", type=float, default=120.0, help="exit (status 3) if never killed")
    args = parser.parse_args(argv)
    return run_append(args) if args.command == "append" else run_compact(args)


if __name__ == "__main__":
    sys.exit(main())
