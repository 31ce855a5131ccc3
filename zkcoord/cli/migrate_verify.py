"""``zkcoord migrate verify``: ZooKeeper's and the log's offsets of each group compared, printed as a table or JSON,
an expected difference (ZooKeeper frozen or behind in the phase) said to be expected.

Part of the ``migrate`` command family (zkcoord.cli.migrate registers it).
"""

import argparse

from tqdm import tqdm

from zkcoord.cli.common import EXIT_OK, EXIT_PROBLEM, emit_json, print_table


def migrate_verify(runner, groups: list[str], args: argparse.Namespace) -> int:
    """``migrate verify``: each group's ZooKeeper and log offsets side by side; exit 1 on a regression."""
    from zkcoord.migration.verify import verify_groups

    with tqdm(
        total=len(groups), unit="group", desc="verify", leave=False, disable=None if len(groups) > 1 else True
    ) as bar:
        results = verify_groups(
            runner.zk, runner.channel, runner.root, groups, advance=bar.update, target=runner.target
        )
    if args.json:
        emit_json([_verification_json(result) for result in results])
    else:
        _print_verification(results, args.verbose, args.target_bootstrap_server)
    return EXIT_OK if all(result.ok for result in results) else EXIT_PROBLEM


def _verification_json(result) -> dict:
    bad = {(r.topic, r.partition) for r in result.regressions}
    kafka = None
    if result.kafka is not None:
        kafka = {
            "counts": result.kafka_counts,
            "behind_on_kafka": len(result.kafka_behind),
            "partitions": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "zkcoord": r.zkcoord,
                    "kafka": r.kafka,
                    "status": r.status.value,
                }
                for r in result.kafka
            ],
        }
    return {
        "kafka": kafka,
        "group": result.group,
        "phase": None if result.phase is None else result.phase.name,
        "counts": result.counts,
        "regressions": len(bad),
        "lag_partitions": result.lag_partitions,
        "lag_offsets": result.lag_offsets,
        "unreadable": [{"topic": t, "partition": p, "data": d} for (t, p), d in sorted(result.unreadable.items())],
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "zookeeper": r.zk,
                "log": r.log,
                "status": r.status.value,
                "regression": (r.topic, r.partition) in bad,
            }
            for r in result.rows
        ],
    }


def _print_verification(results, verbose: bool, target: str | None) -> None:
    from zkcoord.migration.verify import ZK_BEHIND_EXPECTED, readers_of

    for result in results:
        bad = {(r.topic, r.partition) for r in result.regressions}
        expected = result.expected_differences
        rows = [
            (
                result.group,
                r.topic,
                r.partition,
                "-" if r.zk is None else r.zk,
                "-" if r.log is None else r.log,
                r.status.value + (" REGRESSION" if (r.topic, r.partition) in bad else ""),
                r.log - r.zk if r.status.value == "log_ahead" else "-",
            )
            for r in result.rows
            if verbose or (r.topic, r.partition) in bad or (r.status.value != "match" and r not in expected)
        ]
        phase = "not migrating" if result.phase is None else f"phase {result.phase.name}"
        print(
            f"\ngroup {result.group} ({phase}; {readers_of(result.phase)}): {len(result.rows)} partition(s), "
            f"{len(bad)} regression(s)"
        )
        for line in _verification_notes(result, ZK_BEHIND_EXPECTED.get(result.phase)):
            print(f"  {line}")
        for (topic, partition), data in sorted(result.unreadable.items()):
            print(f"  unreadable ZooKeeper offset {topic}-{partition}: {data!r}")
        if rows:
            print_table(
                rows, ("GROUP", "TOPIC", "PARTITION", "ZOOKEEPER-OFFSET", "LOG-OFFSET", "STATUS", "ZOOKEEPER-BEHIND")
            )
        if result.kafka is not None:
            _print_kafka_comparison(result, verbose, target)


def _verification_notes(result, why_expected: str | None) -> list[str]:
    """What the comparison found, a sentence per kind of difference; an expected one says it is expected."""
    counts = result.counts
    notes = []
    if result.lag_partitions:
        behind = f"{result.lag_partitions} partition(s) behind the log by {result.lag_offsets} offset(s)"
        notes.append((why_expected or "ZooKeeper {behind}").format(behind=behind))
    if counts["zk_ahead"]:
        notes.append(f"ZooKeeper ahead of the log on {counts['zk_ahead']} partition(s)")
    if counts["missing"]:
        notes.append(f"{counts['missing']} partition(s) in one store only")
    if counts["match"]:
        notes.append(f"{counts['match']} partition(s) the same in both stores")
    return notes


def _print_kafka_comparison(result, verbose: bool, target: str) -> None:
    """The log against the Kafka cluster's offsets, as kafka-consumer-groups --describe lays out a group."""
    counts = ", ".join(f"{n} {status}" for status, n in result.kafka_counts.items())
    print(
        f"group {result.group} against Kafka at {target}: {len(result.kafka)} partition(s): {counts}; "
        f"{len(result.kafka_behind)} partition(s) behind on Kafka"
    )
    rows = [
        (
            result.group,
            r.topic,
            r.partition,
            "-" if r.zkcoord is None else r.zkcoord,
            "-" if r.kafka is None else r.kafka,
            r.status.value,
            "-" if r.kafka_minus_zkcoord is None else r.kafka_minus_zkcoord,
        )
        for r in result.kafka
        if verbose or r.status.value != "match"
    ]
    if rows:
        print_table(
            rows, ("GROUP", "TOPIC", "PARTITION", "ZKCOORD-OFFSET", "KAFKA-OFFSET", "STATUS", "KAFKA-MINUS-ZKCOORD")
        )
