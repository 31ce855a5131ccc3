"""What ``zkcoord lag`` shows of evaluated groups: table rows, JSON shaped loosely as Burrow's HTTP answers, and
Prometheus metric families named as kafka_exporter names them (zkcoord's own prefixed ``zkcoord_``).

Pure: evaluated groups in, rows, documents and metric families out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily

from zkcoord.lag.evaluator import Commit, GroupLag, GroupStatus, PartitionLag, PartitionStatus

TABLE_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "STATUS")


def table_rows(lag: GroupLag) -> list[tuple]:
    """One row per partition, kafka-consumer-groups' columns and the partition's status ("-": unknown)."""
    return [
        (
            lag.group_id,
            p.partition.topic,
            p.partition.partition,
            p.end.offset if p.end else "-",
            "-" if p.log_end is None else p.log_end,
            p.current_lag if p.log_end is not None else "-",
            p.status.name,
        )
        for p in lag.partitions
    ]


def status_line(lag: GroupLag) -> str:
    """The group's status, its total lag and its most lagging partition."""
    if lag.uncommitted:
        return f"Group {lag.group_id}: NOTFOUND (it exists but has committed no offset; not counted in the exit code)"
    if lag.status == GroupStatus.NOTFOUND:
        return f"Group {lag.group_id}: NOTFOUND (no committed offsets in ZooKeeper or on a coordinator)"
    worst = lag.max_lag
    where = f", max lag {worst.current_lag} on {worst.partition.topic}-{worst.partition.partition}" if worst else ""
    return f"Group {lag.group_id}: {lag.status.name} (total lag {lag.total_lag}{where})"


def group_json(cluster: str, lag: GroupLag, show_all: bool = True) -> dict:
    """Burrow's ``ConsumerGroupStatus``; ``show_all`` False keeps only partitions that are not OK (its /status)."""
    partitions = [p for p in lag.partitions if show_all or p.status != PartitionStatus.OK]
    return {
        "cluster": cluster,
        "group": lag.group_id,
        "status": lag.status.name,
        "complete": _complete(lag),
        "partitions": [partition_json(p) for p in partitions],
        "partition_count": len(lag.partitions),
        "maxlag": partition_json(lag.max_lag) if lag.max_lag else None,
        "totallag": lag.total_lag,
    }


def _complete(lag: GroupLag) -> float:
    """Burrow's: the share of partitions whose window is full (0 without partitions)."""
    if not lag.partitions:
        return 0.0
    return sum(1 for p in lag.partitions if p.complete == 1.0) / len(lag.partitions)


def partition_json(p: PartitionLag) -> dict:
    return {
        "topic": p.partition.topic,
        "partition": p.partition.partition,
        "status": p.status.name,
        "start": _commit_json(p.start),
        "end": _commit_json(p.end),
        "current_lag": p.current_lag,
        "log_end_offset": p.log_end,
        "complete": p.complete,
    }


def _commit_json(commit: Commit | None) -> dict | None:
    if commit is None:
        return None
    return {"offset": commit.offset, "timestamp": commit.timestamp_ms, "lag": commit.lag}


def metric_families(lags: Iterable[GroupLag]) -> Iterator[GaugeMetricFamily]:
    """kafka_exporter's consumer-group gauges, and each group's and partition's status as zkcoord's."""
    lags = [lag for lag in lags if lag.status != GroupStatus.NOTFOUND]
    labels = ["consumergroup", "topic", "partition"]
    lag_family = GaugeMetricFamily(
        "kafka_consumergroup_lag", "Current lag of a consumer group at a partition", labels=labels
    )
    offset_family = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "Committed offset of a consumer group at a partition", labels=labels
    )
    sum_family = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum", "Current lag of a consumer group on a topic", labels=["consumergroup", "topic"]
    )
    offset_sum_family = GaugeMetricFamily(
        "kafka_consumergroup_current_offset_sum",
        "Sum of a consumer group's committed offsets on a topic",
        labels=["consumergroup", "topic"],
    )
    members_family = GaugeMetricFamily(
        "kafka_consumergroup_members", "Number of members in a consumer group", labels=["consumergroup"]
    )
    end_family = GaugeMetricFamily(
        "kafka_topic_partition_current_offset", "Log-end offset of a partition", labels=["topic", "partition"]
    )
    group_family = GaugeMetricFamily(
        "zkcoord_consumergroup_status",
        "1 for the consumer group's status (Burrow's rules), 0 for the others",
        labels=["consumergroup", "status"],
    )
    partition_family = GaugeMetricFamily(
        "zkcoord_consumergroup_partition_status",
        "1 for the partition's status (Burrow's rules), 0 for the others",
        labels=[*labels, "status"],
    )
    ends: dict[tuple[str, str], int] = {}
    for lag in lags:
        sums: dict[str, int] = {}
        offset_sums: dict[str, int] = {}
        if lag.members is not None:
            members_family.add_metric([lag.group_id], lag.members)
        for status in GroupStatus:
            if status != GroupStatus.NOTFOUND:
                group_family.add_metric([lag.group_id, status.name], 1.0 if lag.status == status else 0.0)
        for p in lag.partitions:
            partition = [lag.group_id, p.partition.topic, str(p.partition.partition)]
            if p.log_end is not None:
                lag_family.add_metric(partition, p.current_lag)
                sums[p.partition.topic] = sums.get(p.partition.topic, 0) + p.current_lag
                ends[(p.partition.topic, str(p.partition.partition))] = p.log_end
            if p.end is not None:
                offset_family.add_metric(partition, p.end.offset)
                offset_sums[p.partition.topic] = offset_sums.get(p.partition.topic, 0) + p.end.offset
            for status in PartitionStatus:
                partition_family.add_metric([*partition, status.name], 1.0 if p.status == status else 0.0)
        for topic, total in sorted(sums.items()):
            sum_family.add_metric([lag.group_id, topic], total)
        for topic, total in sorted(offset_sums.items()):
            offset_sum_family.add_metric([lag.group_id, topic], total)
    for (topic, partition), end in sorted(ends.items()):
        end_family.add_metric([topic, partition], end)
    yield from (
        lag_family,
        offset_family,
        sum_family,
        offset_sum_family,
        members_family,
        end_family,
        group_family,
        partition_family,
    )
