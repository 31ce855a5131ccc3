"""``zkcoord log verify|dump|compact|load|raise-epoch``: the offsets log's partition directories, read and compacted
offline, and ZooKeeper's leader epochs raised to theirs after a ZooKeeper reset.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import json
import sys
from pathlib import Path

from kazoo.exceptions import NoNodeError
from tqdm import tqdm

from zkcoord.cli.common import (
    EXIT_OK,
    EXIT_PROBLEM,
    UsageError,
    emit_json,
    print_table,
    zookeeper,
    zookeeper_option,
)
from zkcoord.clock import SystemClock
from zkcoord.errors import UnreadableLogStateError
from zkcoord.log import LogConfig
from zkcoord.log.cleaner import clean
from zkcoord.log.fence import EPOCH_FILE, read_stored_epoch
from zkcoord.log.inspect import BAD_RECORD, PartitionSummary, Problem, describe_records, scan_partition
from zkcoord.log.loader import load_partition
from zkcoord.log.partition import PartitionLog
from zkcoord.log.segment import partition_directories
from zkcoord.runtime.durable import OFFSETS_TOPIC
from zkcoord.zk import layout
from zkcoord.zk.leader_znodes import raise_partition_epoch

EPOCH_AHEAD = "leader epoch ahead of ZooKeeper"


def _log_config(args: argparse.Namespace):
    return LogConfig(skip_corrupt_segments=getattr(args, "skip_corrupt", False))


def _partitions(args: argparse.Namespace) -> list[Path]:
    try:
        # A leader-epoch file alone: a leader claimed the directory but could not recover it (verify says why).
        found = partition_directories(args.path, markers=(EPOCH_FILE,))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if not found:
        raise UsageError(f"{args.path} holds no partition directory (no *.log segment files)")
    return found


def _progress(total: int, description: str):
    return tqdm(total=total, unit="B", unit_scale=True, desc=description, leave=False, disable=None)


def cmd_log_verify(args: argparse.Namespace) -> int:
    summaries = [scan_partition(directory) for directory in _partitions(args)]
    problems = {summary.directory: summary.problems for summary in summaries}
    if args.zookeeper:
        for summary, problem in _epochs_ahead_of_zookeeper(args, summaries):
            problems[summary.directory].append(problem)
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
                        "leader_epoch": summary.leader_epoch,
                        "problems": [
                            {
                                "kind": problem.kind,
                                "file": str(problem.path),
                                "position": problem.position,
                                "offset": problem.offset,
                                "reason": problem.reason,
                            }
                            for problem in problems[summary.directory]
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
                ", ".join(sorted({problem.kind for problem in problems[summary.directory]})) or "ok",
            )
            for summary in summaries
        ]
        print_table(rows, ("PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "STATUS"))
        for summary in summaries:
            if summary.pending_swap:
                print(f"{summary.directory}: an interrupted compaction will be completed when the log is opened")
        for found in problems.values():
            for problem in found:
                print(problem)
    return EXIT_PROBLEM if any(problems.values()) else EXIT_OK


def _offsets_partition(directory: Path) -> int | None:
    """The offsets partition a ``__consumer_offsets-<p>`` directory holds, None for another name."""
    topic, _, number = directory.name.rpartition("-")
    return int(number) if topic == OFFSETS_TOPIC and number.isdigit() else None


def _zookeeper_epochs(client, root: str, partitions: list[int]) -> dict[int, int]:
    """The last leader epoch ZooKeeper handed out for each partition (0 when it never elected one)."""
    epochs = {}
    for partition in partitions:
        path = layout.partition_epoch_path(root, partition)
        try:
            data, _ = client.get(path)
        except NoNodeError:
            epochs[partition] = 0
            continue
        epochs[partition] = layout.decode_partition_epoch(path, data)
    return epochs


def _epochs_ahead_of_zookeeper(
    args: argparse.Namespace, summaries: list[PartitionSummary]
) -> list[tuple[PartitionSummary, Problem]]:
    """A directory whose ``leader-epoch`` is above ZooKeeper's counter refuses every leader ZooKeeper elects."""
    stored = {
        partition: summary
        for summary in summaries
        if summary.leader_epoch is not None and (partition := _offsets_partition(summary.directory)) is not None
    }
    with zookeeper(args) as client:
        epochs = _zookeeper_epochs(client, args.root, sorted(stored))
    return [
        (
            summary,
            Problem(
                EPOCH_AHEAD,
                summary.directory / EPOCH_FILE,
                f"epoch {summary.leader_epoch} is above ZooKeeper's {epochs[partition]} for partition {partition} "
                f"under {args.root}: every leader ZooKeeper elects is refused; run `zkcoord log raise-epoch`",
            ),
        )
        for partition, summary in stored.items()
        if summary.leader_epoch > epochs[partition]
    ]


def cmd_log_raise_epoch(args: argparse.Namespace) -> int:
    """Raise ZooKeeper's epoch counters to the epochs recorded on disk (after ZooKeeper lost or reset them)."""
    stored = {}
    for directory in _partitions(args):
        partition = _offsets_partition(directory)
        if partition is None:
            continue
        try:
            epoch = read_stored_epoch(directory)
        except UnreadableLogStateError as error:
            print(f"skipped: {error}", file=sys.stderr)
            continue
        if epoch is not None:
            stored[partition] = epoch
    with zookeeper(args) as client:
        for partition, epoch in sorted(stored.items()):
            before = raise_partition_epoch(client, args.root, partition, epoch, dry_run=args.dry_run)
            verb = "would raise" if args.dry_run else "raised"
            if before < epoch:
                print(f"partition {partition}: {verb} ZooKeeper's epoch from {before} to {epoch} (on disk)")
            else:
                print(f"partition {partition}: ZooKeeper's epoch {before} is not below the disk's {epoch}")
    return EXIT_OK


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
        found.extend(problem for problem in summary.problems if problem.kind != BAD_RECORD)  # shown inline
    for problem in found:
        print(problem, file=sys.stderr)
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

    verify = actions.add_parser(
        "verify",
        help="check every entry's length and CRC, every record, swap.json and leader-epoch (exit 1 on a problem)",
    )
    verify.add_argument("path", help=path_help)
    verify.add_argument("--json", action="store_true")
    verify.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        help="also compare each leader-epoch file with the epoch ZooKeeper last handed out",
    )
    verify.add_argument("--root", default=layout.DEFAULT_ROOT, help="zkcoord's ZooKeeper root")
    verify.set_defaults(func=cmd_log_verify)

    raise_epoch = actions.add_parser(
        "raise-epoch",
        help="raise ZooKeeper's leader epochs to those recorded in the partition directories (after a ZooKeeper reset)",
    )
    raise_epoch.add_argument("path", help=path_help)
    zookeeper_option(raise_epoch)
    raise_epoch.add_argument("--root", default=layout.DEFAULT_ROOT, help="zkcoord's ZooKeeper root")
    raise_epoch.add_argument("--dry-run", action="store_true", help="only say what would be raised")
    raise_epoch.set_defaults(func=cmd_log_raise_epoch)

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
