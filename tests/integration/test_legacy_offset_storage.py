"""The legacy consumer's offset storage: ZooKeeper, the coordinator's log, dual commit, and the group's phase
(legacy-zk-protocol.md §5.1–§5.3, §7), against a real ZooKeeper and real coordinator node processes.

Stores are arranged directly (ZooKeeper znodes, simple OffsetCommits on the wire) and the log is read from
its segment files, so nothing depends on the coordinator's own migration behaviour (mirroring, MAX answers).
Where a mirror could also have written ZooKeeper, the test writes a *higher* ZooKeeper offset first: the
mirror only ever raises an offset, so a lower value afterwards can only come from the member's plain write.
"""

import json
import logging
import signal
import threading
import time

import pytest
from cluster_support import Cluster, GroupClient, commit_retriable, eventually, subscription
from legacy_support import Recorder, member, prepare_cluster

from zkcoord.config import build_config
from zkcoord.errors import CommitFailedError, ConfigError, CoordinatorMembersError, ZkcoordError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.offsets import mode_for
from zkcoord.log.inspect import scan_partition
from zkcoord.log.segment import partition_directories
from zkcoord.migration import store
from zkcoord.migration.phases import LOG, MAX, MIRROR, ZK, MigrationState, Phase, encode_state
from zkcoord.model import TopicPartition
from zkcoord.offsets.records import OffsetCommitKey, decode_key, decode_value
from zkcoord.testing.zookeeper import expire_session, wait_until
from zkcoord.zk import layout

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 2000,
    "coordinator.claim.grace.ms": 200,
}
ROOT = layout.DEFAULT_ROOT
KAFKA = {
    "offsets.storage": "kafka",
    "dual.commit.enabled": False,
    "offsets.channel.backoff.ms": 100,
    "offsets.channel.socket.timeout.ms": 3000,
}
DUAL = {**KAFKA, "dual.commit.enabled": True}
T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
CALL_SECONDS = 15.0


@pytest.fixture
def cluster(zk, zk_connect, tmp_path):
    """Topic ``t`` (4 partitions) and ``u`` (1), a broker registration, and one coordinator node."""
    prepare_cluster(zk, {"t": 4, "u": 1})
    with Cluster(zk_connect, tmp_path / "log", tmp_path, NODE_OVERRIDES) as running:
        running.start([1])
        running.wait_balanced(zk)
        yield running


@pytest.fixture
def wire(cluster):
    client = GroupClient(cluster.addresses)
    cluster.on_close(client.close)
    return client


def logged(cluster, group="g") -> dict[TopicPartition, int]:
    """The group's latest offsets in the log, read from the segment files (read-only, the nodes keep running)."""
    found: dict[TopicPartition, int] = {}

    def visit(path, batch):
        for offset, key_bytes, value_bytes in batch.entries():
            key = decode_key(key_bytes, offset)
            if isinstance(key, OffsetCommitKey) and key.group == group:
                tp = TopicPartition(key.topic, key.partition)
                if value_bytes is None:
                    found.pop(tp, None)
                else:
                    found[tp] = decode_value(key, value_bytes, offset).offset

    for directory in partition_directories(cluster.log_dir):
        scan_partition(directory, visit=visit)
    return found


def simple_commit(wire, offsets: dict[TopicPartition, int], group="g") -> dict[TopicPartition, int]:
    """A simple OffsetCommit, as 0.8.2 sends it; the error code per partition."""
    topics: dict[str, list] = {}
    for tp, offset in offsets.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": ""}
        )
    response, _ = wire.call(
        group,
        "OffsetCommit",
        time.monotonic() + CALL_SECONDS,
        retriable=commit_retriable,
        group_id=group,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[{"name": name, "partitions": partitions} for name, partitions in topics.items()],
    )
    return {
        TopicPartition(t["name"], p["partition_index"]): p["error_code"]
        for t in response["topics"]
        for p in t["partitions"]
    }


def zk_offset(zk, tp: TopicPartition, group="g") -> int | None:
    path = layout.offset_path(group, *tp)
    return int(zk.get(path)[0]) if zk.exists(path) else None


def set_zk_offset(zk, tp: TopicPartition, offset: int, group="g") -> None:
    path = layout.offset_path(group, *tp)
    if zk.exists(path):
        zk.set(path, layout.encode_offset(offset))
    else:
        zk.create(path, layout.encode_offset(offset), makepath=True)


def advert(zk, consumer) -> dict | None:
    path = layout.legacy_advert_path(ROOT, "g", consumer.consumer_id)
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def set_phase(zk, phase: Phase, epoch: int) -> None:
    _, version = store.read_state(zk, ROOT, "g")
    store.write_state(zk, ROOT, "g", MigrationState(phase, epoch), version)


# ---- configuration (§7) and the phase table ---------------------------------------------------------------


def legacy_config(**properties):
    return build_config(LegacyConsumerConfig, {"group.id": "g", "zookeeper.connect": "h:1", **properties})


def test_offsets_storage_and_kafka_dual_commit_default_spec_7():
    default = legacy_config()
    assert default.offsets_storage == "zookeeper" and default.dual_commit_enabled is False
    assert default.offsets_channel_socket_timeout_ms == 10000 and default.offsets_channel_backoff_ms == 1000
    assert default.bootstrap_servers is None and default.zkcoord_root == ROOT
    kafka = legacy_config(**{"offsets.storage": "KAFKA"})
    assert kafka.offsets_storage == "kafka" and kafka.dual_commit_enabled is True and kafka.dual_commit
    assert legacy_config(**{"offsets.storage": "kafka", "dual.commit.enabled": "false"}).dual_commit is False
    # 0.8.2 ignores dual commit with ZooKeeper storage
    assert legacy_config(**{"dual.commit.enabled": "true"}).dual_commit is False
    aliases = legacy_config(
        offsets_storage="kafka",
        dual_commit_enabled=False,
        bootstrap_servers="127.0.0.1:9092",
        zkcoord_root="/elsewhere",
        offsets_channel_socket_timeout_ms="2500",
    )
    assert (aliases.dual_commit, aliases.bootstrap_servers, aliases.zkcoord_root) == (
        False,
        "127.0.0.1:9092",
        "/elsewhere",
    )
    assert aliases.offsets_channel_socket_timeout_ms == 2500
    with pytest.raises(ConfigError, match="offsets.storage=redis is not valid: use zookeeper or kafka"):
        legacy_config(**{"offsets.storage": "redis"})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        legacy_config(**{"bootstrap.servers": "no-port"})
    with pytest.raises(ConfigError, match="zkcoord.root"):
        legacy_config(**{"zkcoord.root": "relative"})
    with pytest.raises(ConfigError, match="offsets.channel.socket.timeout.ms"):
        legacy_config(**{"offsets.channel.socket.timeout.ms": 0})


@pytest.mark.parametrize(
    ("storage", "dual", "state", "writes", "reads", "advertised"),
    [
        ("zookeeper", False, None, (ZK,), ZK, ("", -1, "zookeeper", False)),
        ("kafka", True, None, (LOG, ZK), MAX, ("", -1, "kafka", True)),
        ("kafka", False, None, (LOG,), LOG, ("", -1, "kafka", False)),
        ("kafka", True, MigrationState(Phase.ZK_ONLY, 4), (ZK,), ZK, ("ZK_ONLY", 4, "zookeeper", False)),
        ("zookeeper", False, MigrationState(Phase.DUAL_WRITE, 5), (LOG, ZK), MAX, ("DUAL_WRITE", 5, "kafka", True)),
        (
            "zookeeper",
            False,
            MigrationState(Phase.LOG_PRIMARY, 6),
            (LOG, MIRROR),
            LOG,
            ("LOG_PRIMARY", 6, "kafka", False),
        ),
        ("kafka", True, MigrationState(Phase.LOG_ONLY, 7), (LOG,), LOG, ("LOG_ONLY", 7, "kafka", False)),
    ],
)
def test_the_phase_wins_over_the_config_spec_5_3(storage, dual, state, writes, reads, advertised):
    mode = mode_for(storage, dual, state)
    assert (mode.rule.writes, mode.reads) == (writes, reads)
    assert mode.advert() == layout.encode_legacy_advert(*advertised)


# ---- storage=kafka (§5.1, §5.2) ---------------------------------------------------------------------------


def test_kafka_storage_commits_every_owned_partition_to_the_log_and_nothing_to_zookeeper_spec_5_1(
    zk, zk_connect, cluster, wire
):
    with member(zk_connect, "m0", subscription={"topics": {"t": 1}}, **KAFKA) as consumer:
        assert advert(zk, consumer) == {
            "version": 1,
            "phase": "",
            "epoch": -1,
            "offsets_storage": "kafka",
            "dual_commit": False,
        }
        consumer.commit({T0: 42, T1: 7})
        assert logged(cluster) == {T0: 42, T1: 7}
        # KAFKA-1510: an unchanged position is sent again with every commit
        assert simple_commit(wire, {T1: 100}) == {T1: 0}
        consumer.commit({T0: 43})
        assert logged(cluster) == {T0: 43, T1: 7}
        assert consumer.committed(T0) == 43 and consumer.committed(T2) is None
    assert not zk.exists(layout.offsets_path("g")), "no ZooKeeper offset without dual commit"


def test_kafka_storage_fetches_from_the_log_only_spec_5_2(zk, zk_connect, cluster, wire):
    """§5.2 without dual commit: ZooKeeper's offsets are not read, even when they are ahead."""
    assert simple_commit(wire, {T0: 30, T1: 31}) == {T0: 0, T1: 0}
    set_zk_offset(zk, T0, 500)
    set_zk_offset(zk, T2, 9)
    with member(zk_connect, "m0", subscription={"topics": {"t": 1}}, **KAFKA) as consumer:
        assert [consumer.position(tp) for tp in (T0, T1, T2, T3)] == [30, 31, -1, -1]
        assert consumer.committed(T0) == 30


def test_dual_commit_writes_zookeeper_only_for_partitions_the_log_accepted_spec_5_1(zk, zk_connect, cluster, wire):
    u0 = TopicPartition("u", 0)
    with member(zk_connect, "m0", subscription={"topics": {"t": 1, "u": 1}}, **DUAL) as consumer:
        assert u0 in consumer.owned_partitions()
        zk.delete(layout.topic_path("u"), recursive=True)  # the coordinator now answers 3 (unknown topic) for u
        eventually(lambda: simple_commit(wire, {u0: 1}, group="probe") == {u0: 3}, 15, "the node to forget u")
        metrics = consumer.metrics
        before = (dict(metrics.commits), dict(metrics.committed_offsets), dict(metrics.commit_failures))
        with pytest.raises(CommitFailedError, match="u-0 UNKNOWN_TOPIC_OR_PARTITION"):
            consumer.commit({T0: 5, T1: 6, u0: 9})
        assert logged(cluster) == {T0: 5, T1: 6}
        assert (zk_offset(zk, T0), zk_offset(zk, T1), zk_offset(zk, u0)) == (5, 6, None)
        # Counted per store: both wrote T0 and T1; the log's refusal of u-0 is its failure.
        after = (metrics.commits, metrics.committed_offsets, metrics.commit_failures)
        assert [
            {store: now[store] - then[store] for store in now} for then, now in zip(before, after, strict=True)
        ] == [
            {"kafka": 1, "zookeeper": 1},
            {"kafka": 2, "zookeeper": 2},
            {"kafka": 1, "zookeeper": 0},
        ]
        exposed = {sample.name: sample.value for family in consumer.metrics.collect() for sample in family.samples}
        assert exposed["kafka_consumer_coordinator_commit_total"] == metrics.commits["kafka"]  # as a new client's
        # Only changed positions go to ZooKeeper (the checkpoint), every position to the log.
        version = zk.get(layout.offset_path("g", *T1))[1].version
        with pytest.raises(CommitFailedError):
            consumer.commit({T0: 8})
        assert zk_offset(zk, T0) == 8 and zk.get(layout.offset_path("g", *T1))[1].version == version


def test_dual_fetch_takes_the_larger_of_zookeeper_and_the_log_spec_5_2(zk, zk_connect, cluster, wire):
    assert simple_commit(wire, {T0: 40, T1: 30}) == {T0: 0, T1: 0}
    set_zk_offset(zk, T0, 50)  # ZooKeeper ahead
    set_zk_offset(zk, T1, 10)  # the log ahead
    set_zk_offset(zk, T2, 5)  # ZooKeeper only; T3 has no offset anywhere
    with member(zk_connect, "m0", subscription={"topics": {"t": 1}}, **DUAL) as consumer:
        assert [consumer.position(tp) for tp in (T0, T1, T2, T3)] == [50, 30, 5, -1]
        assert [consumer.committed(tp) for tp in (T0, T1, T2, T3)] == [50, 30, 5, None]
        t0_version = zk.get(layout.offset_path("g", *T0))[1].version
        consumer.commit()
        # Both stores now hold what the member reads; ZooKeeper was written only where it differed.
        assert logged(cluster) == {T0: 50, T1: 30, T2: 5}
        assert [zk_offset(zk, tp) for tp in (T0, T1, T2, T3)] == [50, 30, 5, None]
        assert zk.get(layout.offset_path("g", *T0))[1].version == t0_version


# ---- the group's phase (§5.3, docs/migration.md) ----------------------------------------------------------


def test_the_phase_overrides_the_config_and_a_live_change_switches_mode_and_advertisement(
    zk, zk_connect, cluster, wire
):
    store.write_state(zk, ROOT, "g", MigrationState(Phase.ZK_ONLY, 1), store.NO_VERSION)
    set_zk_offset(zk, T0, 1000)
    recorder = Recorder()
    # Configured for the log only; the phase says ZooKeeper only.
    consumer = member(zk_connect, "m0", recorder=recorder, subscription={"topics": {"t": 1}}, **KAFKA).start()
    try:
        assert advert(zk, consumer)["phase"] == "ZK_ONLY" and advert(zk, consumer)["epoch"] == 1
        assert consumer.position(T0) == 1000  # read from ZooKeeper
        consumer.commit({T0: 5})
        assert zk_offset(zk, T0) == 5 and T0 not in logged(cluster)

        set_phase(zk, Phase.DUAL_WRITE, 2)
        wait_until(lambda: advert(zk, consumer)["epoch"] == 2, what="the DUAL_WRITE advertisement")
        assert advert(zk, consumer) == {
            "version": 1,
            "phase": "DUAL_WRITE",
            "epoch": 2,
            "offsets_storage": "kafka",
            "dual_commit": True,
        }
        set_zk_offset(zk, T0, 1000)
        consumer.commit({T0: 6})  # lower than ZooKeeper's: only the member's own plain write can set it
        assert logged(cluster)[T0] == 6 and zk_offset(zk, T0) == 6

        set_phase(zk, Phase.LOG_PRIMARY, 3)
        wait_until(lambda: advert(zk, consumer)["epoch"] == 3, what="the LOG_PRIMARY advertisement")
        assert advert(zk, consumer)["dual_commit"] is False
        set_zk_offset(zk, T0, 1000)
        consumer.commit({T0: 7})
        assert logged(cluster)[T0] == 7 and zk_offset(zk, T0) == 1000  # the member left ZooKeeper alone

        modes = [(e["phase"], e["epoch"], e["writes"], e["reads"]) for e in recorder.of("legacy.offsets_mode")]
        assert modes == [
            ("ZK_ONLY", 1, ["zookeeper"], "zookeeper"),
            ("DUAL_WRITE", 2, ["log", "zookeeper"], "max"),
            ("LOG_PRIMARY", 3, ["log", "mirror"], "log"),
        ]
    finally:
        consumer.close()


GARBAGE = b"\x00 not a migration state"


def test_an_unreadable_migration_state_keeps_the_member_in_the_mode_it_followed(zk, zk_connect, cluster, caplog):
    """Fail closed: garbage in the migration znode must not send a LOG_ONLY member back to its ZooKeeper config
    (acknowledged commits would miss the log, whose older offsets are read again once the znode is repaired)."""
    store.write_state(zk, ROOT, "g", MigrationState(Phase.LOG_ONLY, 3), store.NO_VERSION)
    path = layout.migration_path(ROOT, "g")
    with member(zk_connect, "m0", subscription={"topics": {"t": 1}}) as consumer:  # offsets.storage=zookeeper
        consumer.commit({T0: 10})
        zk.set(path, GARBAGE)
        wait_until(lambda: f"{path}: not a migration state" in caplog.text, what="the member to read the garbage")
        consumer.commit({T0: 11})
        consumer.commit({T0: 12})
        assert logged(cluster)[T0] == 12 and zk_offset(zk, T0) is None
        assert advert(zk, consumer)["epoch"] == 3, "no new epoch is acknowledged"
        warnings = [r.getMessage() for r in caplog.records if "unreadable migration state" in r.getMessage()]
        assert len(warnings) == 1, warnings  # once per change of the znode, not per commit
        assert f"{path}: not a migration state" in warnings[0] and "keeps following phase LOG_ONLY" in warnings[0]

        zk.set(path, encode_state(MigrationState(Phase.LOG_ONLY, 4)))  # the watch brings the repair at once
        wait_until(lambda: advert(zk, consumer)["epoch"] == 4, what="the repaired state's advertisement")
        consumer.commit({T0: 13})
        assert logged(cluster)[T0] == 13 and zk_offset(zk, T0) is None


def test_a_member_started_on_an_unreadable_migration_state_neither_commits_nor_fetches_until_repaired(
    zk, zk_connect, cluster, wire
):
    store.write_state(zk, ROOT, "g", MigrationState(Phase.LOG_ONLY, 3), store.NO_VERSION)
    assert simple_commit(wire, {T0: 30}) == {T0: 0}
    set_zk_offset(zk, T0, 5)  # older: where a member that guessed ZooKeeper would start
    path = layout.migration_path(ROOT, "g")
    zk.set(path, GARBAGE)
    recorder = Recorder()
    fast = {**KAFKA, "offsets.storage": "zookeeper", "rebalance.max.retries": 200}
    consumer = member(zk_connect, "m0", recorder=recorder, subscription={"topics": {"t": 1}}, **fast)
    starter = threading.Thread(target=consumer.start)
    starter.start()
    try:
        first = recorder.wait_for("legacy.rebalance_attempt", timeout=10)[0]
        assert first["outcome"] == "error" and first["claimed"] == [], "no offset fetched under a guessed mode"
        assert "migration state cannot be read" in first["error"] and path in first["error"]
        assert starter.is_alive() and consumer.offsets_mode is None and consumer.owned_partitions() == set()
        with pytest.raises(CommitFailedError, match="migration state cannot be read"):
            consumer.commit()
        with pytest.raises(ZkcoordError, match="migration state cannot be read"):
            consumer.committed(T0)
        assert advert(zk, consumer) is None, "no mode, no advertisement"
        assert zk_offset(zk, T0) == 5 and logged(cluster) == {T0: 30}

        zk.set(path, encode_state(MigrationState(Phase.LOG_ONLY, 3)))
        starter.join(timeout=60)
        assert not starter.is_alive()
        assert consumer.position(T0) == 30 and advert(zk, consumer)["epoch"] == 3
        consumer.commit({T0: 31})
        assert logged(cluster)[T0] == 31 and zk_offset(zk, T0) == 5
    finally:
        consumer.close()
        starter.join(timeout=60)


def test_advertisement_is_ephemeral_and_recreated_after_session_expiry(zk, zk_connect):
    """No coordinator node at all: a ZooKeeper-storage member neither needs nor looks for one."""
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        path = layout.legacy_advert_path(ROOT, "g", consumer.consumer_id)
        data, stat = zk.get(path)
        assert data == layout.encode_legacy_advert("", -1, "zookeeper", False)
        assert stat.ephemeralOwner == consumer.zk_client.client_id[0]
        registration = zk.get(layout.consumer_path("g", consumer.consumer_id))[0]
        assert json.loads(registration).keys() == {"version", "subscription", "pattern", "timestamp"}

        expire_session(consumer.zk_client)
        recorder.wait_for("legacy.session_expired")
        recorder.wait_for("legacy.registered", count=2)

        def recreated():
            current = zk.exists(path)
            return (
                current is not None and current.ephemeralOwner == consumer.zk_client.client_id[0] != stat.ephemeralOwner
            )

        wait_until(recreated, what="the advertisement in the new session")
        assert zk.get(path)[0] == data


# ---- one protocol per group -------------------------------------------------------------------------------


def test_a_member_refuses_a_group_run_by_coordinator_members(zk, zk_connect, wire, cluster):
    join = {
        "group_id": "g",
        "session_timeout_ms": 30000,
        "rebalance_timeout_ms": 30000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(["t"])}],
    }
    deadline = time.monotonic() + CALL_SECONDS
    first, _ = wire.call("g", "JoinGroup", deadline, member_id="", **join)
    assert first["error_code"] == 79, first
    joined, _ = wire.call("g", "JoinGroup", deadline, member_id=first["member_id"], **join)
    assert joined["error_code"] == 0, joined
    bootstrap = ",".join(f"{host}:{port}" for host, port in cluster.addresses().values())
    for props in ({}, {"bootstrap.servers": bootstrap}, KAFKA):
        consumer = member(zk_connect, "m0", **props)
        with pytest.raises(CoordinatorMembersError, match=f"'g' is run by coordinator .*{joined['member_id']}"):
            consumer.start()
    assert not zk.exists(layout.consumer_path("g", "g_m0")), "refused before registering"


def test_zookeeper_member_starts_when_no_configured_coordinator_answers(zk, zk_connect, caplog):
    prepare_cluster(zk, {"t": 2})
    caplog.set_level(logging.DEBUG, logger="zkcoord.legacy.consumer")
    unreachable = {"bootstrap.servers": "127.0.0.1:1", "offsets.channel.socket.timeout.ms": 500}
    with member(zk_connect, "m0", **unreachable) as consumer:
        consumer.commit({T0: 3})
        assert zk_offset(zk, T0) == 3 and consumer.committed(T0) == 3
    assert "not checking for coordinator members" in caplog.text


# ---- retries (§5.1) ---------------------------------------------------------------------------------------


def test_shutdown_commit_retries_until_a_coordinator_is_back_spec_5_1(zk, zk_connect, cluster, wire, caplog):
    props = {
        **KAFKA,
        "auto.commit.enable": True,
        "auto.commit.interval.ms": 600_000,
        "offsets.commit.max.retries": 50,
        "offsets.channel.backoff.ms": 200,
        "offsets.channel.socket.timeout.ms": 1000,
    }
    consumer = member(zk_connect, "m0", subscription={"topics": {"t": 1}}, **props).start()
    consumer.seek(T0, 11)
    first = cluster.nodes[1]
    first.signal(signal.SIGTERM)  # a clean stop: its registration goes at once
    first.process.wait(timeout=20)
    closer = threading.Thread(target=consumer.close)
    closer.start()
    wait_until(lambda: "offset commit failed" in caplog.text, what="a failed commit try")
    assert closer.is_alive(), "close() gave up while retries remained"
    cluster.start([2])  # same offsets log, another node
    closer.join(timeout=60)
    assert not closer.is_alive()
    assert logged(cluster) == {T0: 11}


def test_startup_fetch_retries_until_a_coordinator_answers_spec_5_2(zk, zk_connect, cluster, wire, caplog):
    assert simple_commit(wire, {T0: 21, T3: 24}) == {T0: 0, T3: 0}
    first = cluster.nodes[1]
    first.signal(signal.SIGTERM)
    first.process.wait(timeout=20)
    # No node registered: no coordinator members to check for, and the fetch waits for one (§5.2).
    fast = {**KAFKA, "offsets.channel.socket.timeout.ms": 1000}
    consumer = member(zk_connect, "m0", subscription={"topics": {"t": 1}}, **fast)
    starter = threading.Thread(target=consumer.start)
    starter.start()
    try:
        wait_until(lambda: "offset fetch from the log failed" in caplog.text, what="a failed fetch try")
        assert starter.is_alive()
        cluster.start([2])
        starter.join(timeout=60)
        assert not starter.is_alive()
        assert [consumer.position(tp) for tp in (T0, T1, T2, T3)] == [21, -1, -1, 24]
    finally:
        consumer.close()
