"""``zkcoord log verify|dump|compact|load``: the offsets log's partition directories, read and compacted offline.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from zkcoord.cli.common import EXIT_OK, EXIT_PROBLEM, UsageError, emit_json, print_table
from zkcoord.clock import SystemClock
from zkcoord.log import LogConfig
from zkcoord.log.cleaner import clean
from zkcoord.log.inspect import describe_records, scan_partition
from zkcoord.log.loader import load_partition
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import partition_directories


def _log_config(args: argparse.Namespace):
    return LogConfig(skip_corrupt_segments=getattr(args, "skip_corrupt", False))


def _partitions(args: argparse.Namespace) -> list[Path]:
    try:
        found = partition_directories(args.path)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if not found:
        raise UsageError(f"{args.path} holds no partition directory (no *.log segment files)")
    return found


def _progress(total: int, description: str):
    return tqdm(total=total, unit="B", unit_scale=True, desc=description, leave=False, disable=None)


def cmd_log_verify(args: argparse.Namespace) -> int:
    summaries = [scan_partition(directory) for directory in _partitions(args)]
    problems = [(summary.directory, kind, problem) for summary in summaries for kind, problem in summary.problems]
    if args.json:
        emit_json(
            {
                "partitions": [
                    {
                        "directory": str(summary.directory),
                        "segments": len(summary.segments),
                        "records": summary.records,
                        "bytes": summary.bytes,
                        "pending_compaction": summary.pending_swap,
                        "problems": [
                            {
                                "kind": kind,
                                "file": str(problem.path),
                                "position": problem.position,
                                "offset": problem.offset,
                                "reason": problem.reason,
                            }
                            for kind, problem in summary.problems
                        ],
                    }
                    for summary in summaries
                ]
            }
        )
    else:
        rows = [
            (
                summary.directory.name,
                len(summary.segments),
                summary.batches,
                summary.records,
                summary.bytes,
                "ok" if not summary.problems else ", ".join(kind for kind, _ in summary.problems),
            )
            for summary in summaries
        ]
        print_table(rows, ("PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "STATUS"))
        for summary in summaries:
            if summary.pending_swap:
                print(f"{summary.directory}: an interrupted compaction will be completed when the log is opened")
        for _, kind, problem in problems:
            print(f"{kind}: {problem}")
    return EXIT_PROBLEM if problems else EXIT_OK


def cmd_log_dump(args: argparse.Namespace) -> int:
    def visit(path: Path, batch) -> None:
        if args.json:
            for record in describe_records(batch):
                line = {"segment": str(path), "base_offset": batch.base_offset, "timestamp": batch.timestamp_ms}
                print(json.dumps({**line, **record}, sort_keys=True))
            return
        print(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {len(batch.records)} "
            f"createTime: {batch.timestamp_ms} size: {batch.size}"
        )
        for record in describe_records(batch):
            text = record.get("error") or f"{record['type']} key: {record['key']} value: {record['value']}"
            print(f"| offset: {record['offset']} {text}")

    found = []
    for directory in _partitions(args):
        if not args.json:
            print(f"Dumping {directory}")
        summary = scan_partition(directory, visit=visit)
        found.extend(summary.problems)
    for kind, problem in found:
        print(f"{kind}: {problem}", file=sys.stderr)
    return EXIT_PROBLEM if found else EXIT_OK


def cmd_log_compact(args: argparse.Namespace) -> int:
    config = _log_config(args)
    for directory in _partitions(args):
        with PartitionLog.open(directory, config) as partition:
            if partition.recovery.truncated or partition.recovery.compaction:
                print(partition.recovery)
            closed_bytes = sum(segment.size for segment in partition.segments[:-1])
            with _progress(3 * closed_bytes, f"compacting {directory.name}") as bar:
                result = clean(partition, SystemClock().now_ms(), args.delete_retention_ms, on_io=bar.update)
            print(f"{directory}: {result or 'nothing to compact (only the active segment)'}")
    return EXIT_OK


def cmd_log_load(args: argparse.Namespace) -> int:
    config = _log_config(args)
    rows = []
    for directory in _partitions(args):
        with PartitionLog.open(directory, config) as partition, _progress(partition.size_bytes, directory.name) as bar:
            result = load_partition(partition, progress=bar.update)
        print(f"{directory}: {result}", file=sys.stderr if args.json else sys.stdout)
        for problem in result.skipped:
            print(f"skipped corrupt data: {problem}", file=sys.stderr)
        for group, offsets in sorted(result.store.offsets.items()):
            for partition_key, committed in sorted(offsets.items()):
                rows.append((group, partition_key.topic, partition_key.partition, committed.offset, committed.metadata))
    if args.json:
        emit_json([dict(zip(("group", "topic", "partition", "offset", "metadata"), row, strict=True)) for row in rows])
    elif rows:
        print_table(rows, ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "METADATA"))
    return EXIT_OK


def register(commands) -> None:
    """Add ``log`` and its actions to the ``zkcoord`` subcommands."""
    logs = commands.add_parser("log", help="the offsets log: check, print, compact, load")
    actions = logs.add_subparsers(dest="action", required=True)
    path_help = "a partition directory, or a log directory (every partition in it)"
    skip_corrupt_help = "read past a corrupt older segment (reported)"

    verify = actions.add_parser("verify", help="check every entry's length and CRC (exit 1 on a problem)")
    verify.add_argument("path", help=path_help)
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_log_verify)

    dump = actions.add_parser("dump", help="print batches and decoded records")
    dump.add_argument("path", help=path_help)
    dump.add_argument("--json", action="store_true", help="one JSON object per record")
    dump.set_defaults(func=cmd_log_dump)

    compact = actions.add_parser("compact", help="compact the closed segments now")
    compact.add_argument("path", help=path_help)
    compact.add_argument(
        "--delete-retention-ms",
        type=int,
        default=None,
        help="keep tombstones this long (log.cleaner.delete.retention.ms)",
    )
    compact.add_argument("--skip-corrupt", action="store_true", help=skip_corrupt_help)
    compact.set_defaults(func=cmd_log_compact)

    load = actions.add_parser("load", help="replay partitions and list the committed offsets")
    load.add_argument("path", help=path_help)
    load.add_argument("--json", action="store_true")
    load.add_argument("--skip-corrupt", action="store_true", help=skip_corrupt_help)
    load.set_defaults(func=cmd_log_load)
