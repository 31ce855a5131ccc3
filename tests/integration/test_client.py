"""The consumer client against a real coordinator node process on a real ZooKeeper."""

import itertools
import threading
import time
import urllib.request

import pytest
from kazoo.client import KazooClient
from test_coordinator_server import serving_port, start_node
from wire_client import WireClient

from zkcoord.client import Consumer
from zkcoord.errors import (
    CommitFailedError,
    ConfigError,
    FencedInstanceIdError,
    IllegalStateError,
    SourceError,
    WakeupError,
)
from zkcoord.model import TopicPartition
from zkcoord.sources import SyntheticSource
from zkcoord.testing.zookeeper import fresh_chroot
from zkcoord.zk import admin

TIMEOUTS = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 200, "retry_backoff_ms": 50}
T = [TopicPartition("t", p) for p in range(4)]
_groups = itertools.count()


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    """One coordinator node for the module; every test uses its own group."""
    connect = fresh_chroot(zk_server)
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    admin.create_topic(zk, "t", 4)
    admin.create_topic(zk, "u", 2)
    process = start_node(connect, tmp_path_factory.mktemp("log"))
    try:
        port = serving_port(process)
        yield {"connect": connect, "bootstrap_servers": f"127.0.0.1:{port}", "port": port, "zk": zk}
    finally:
        process.terminate()
        process.wait(timeout=30)
        zk.stop()
        zk.close()


@pytest.fixture
def make_consumer(cluster):
    made = []

    def make(*topics, group=None, **config):
        settings = {"bootstrap_servers": cluster["bootstrap_servers"], "auto_offset_reset": "earliest", **TIMEOUTS}
        if group is not None:
            settings["group_id"] = group
        settings.update(config)
        source = settings.pop("source", None) or SyntheticSource(rate_per_partition=200)
        consumer = Consumer(*topics, source=source, **settings)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close(timeout_ms=5000)  # also for a fenced consumer: close() never raises its fatal error


def new_group() -> str:
    return f"group-{next(_groups)}-{time.monotonic_ns()}"


def drive(consumers, until, timeout=20.0, poll_ms=20):
    """Poll every consumer in turn until ``until()`` holds."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            states = [(c.member_state, sorted(c.assignment())) for c in consumers]
            raise AssertionError(f"timed out; consumers: {states}")
        for consumer in consumers:
            consumer.poll(poll_ms)


def describe(cluster, group):
    with WireClient("127.0.0.1", cluster["port"]) as client:
        return client.call("DescribeGroups", groups=[group])["groups"][0]


class Recorder:
    """A rebalance listener that records each call, its thread, and whether calls ever overlapped."""

    def __init__(self, consumer_ref=None, revoke_seconds=0.0):
        self.calls = []
        self.revoked = set()
        self.threads = set()
        self.overlapped = False
        self._inside = False
        self.revoke_seconds = revoke_seconds
        self.consumer = consumer_ref
        self.committed_at_revoke = {}

    def _record(self, name, partitions):
        if self._inside:
            self.overlapped = True
        self._inside = True
        self.threads.add(threading.get_ident())
        self.calls.append((name, sorted(p.partition for p in partitions)))
        self.revoked.update(partitions if name == "revoked" else ())

    def on_partitions_assigned(self, partitions):
        self._record("assigned", partitions)
        self._inside = False

    def on_partitions_revoked(self, partitions):
        self._record("revoked", partitions)
        if self.consumer is not None:
            for partition in partitions:
                self.committed_at_revoke[partition] = (
                    self.consumer.committed(partition),
                    self.consumer.position(partition),
                )
        time.sleep(self.revoke_seconds)
        self._inside = False

    def on_partitions_lost(self, partitions):
        self._record("lost", partitions)
        self._inside = False


def test_kafka_property_names_and_snake_case_aliases_configure_the_same_consumer(make_consumer, cluster):
    group = new_group()
    by_kafka_names = make_consumer(**{"group.id": group, "session.timeout.ms": 2000, "enable.auto.commit": "false"})
    assert by_kafka_names.config.group_id == group
    assert by_kafka_names.config.session_timeout_ms == 2000
    assert by_kafka_names.config.enable_auto_commit is False
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        Consumer(auto_offset_reset="sometimes", bootstrap_servers=cluster["bootstrap_servers"])


def test_callbacks_run_on_the_polling_thread_in_order_and_commit_before_revoke(make_consumer):
    group = new_group()
    first = make_consumer(group=group, auto_commit_interval_ms=60000)
    recorder = Recorder(first)
    first.subscribe(["t"], listener=recorder)
    drive([first], lambda: len(first.assignment()) == 4)
    drive([first], lambda: all(first.position(tp) > 0 for tp in T))
    second = make_consumer("t", group=group)
    drive([first, second], lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2)
    kept = sorted(tp.partition for tp in first.assignment())  # range: which half depends on the member ids
    assert recorder.calls == [("assigned", [0, 1, 2, 3]), ("revoked", [0, 1, 2, 3]), ("assigned", kept)]
    assert recorder.threads == {threading.get_ident()}
    assert not recorder.overlapped
    # Auto-commit on: the positions were committed before on_partitions_revoked ran (eager, Kafka's onJoinPrepare).
    assert all(committed == position for committed, position in recorder.committed_at_revoke.values())


def test_slow_revocation_callback_longer_than_the_session_keeps_the_member(make_consumer, cluster):
    group = new_group()
    slow = Recorder(revoke_seconds=3.0)  # session.timeout.ms is 2000
    first = make_consumer(group=group)
    first.subscribe(["t"], listener=slow)
    drive([first], lambda: len(first.assignment()) == 4)
    member_id = describe(cluster, group)["members"][0]["member_id"]
    second = make_consumer("t", group=group)
    drive([first, second], lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2, timeout=30)
    assert member_id in {m["member_id"] for m in describe(cluster, group)["members"]}
    assert [name for name, _ in slow.calls] == ["assigned", "revoked", "assigned"]  # never "lost"


def test_cpu_bound_work_between_polls_does_not_cost_the_session(make_consumer, cluster):
    group = new_group()
    busy = make_consumer("t", group=group)
    drive([busy], lambda: len(busy.assignment()) == 4)
    generation = describe(cluster, group)
    started = time.monotonic()
    spins = 0
    while time.monotonic() - started < 4.0:  # pure Python for twice the session timeout: holds the GIL in turns
        spins += sum(range(1000))
    busy.poll(0)
    after = describe(cluster, group)
    assert after["group_state"] == "Stable"
    assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in generation["members"]]
    assert busy.metrics()["rebalance-total"] == 1
    assert busy.metrics()["last-heartbeat-seconds-ago"] < 1.0


def test_max_poll_interval_evicts_a_stuck_poller_which_loses_its_partitions_and_rejoins(make_consumer):
    group = new_group()
    stuck_listener = Recorder()
    stuck = make_consumer(group=group, max_poll_interval_ms=1500)
    stuck.subscribe(["t"], listener=stuck_listener)
    other = make_consumer("t", group=group, max_poll_interval_ms=1500)
    drive([stuck, other], lambda: len(stuck.assignment()) == 2 and len(other.assignment()) == 2)
    drive([other], lambda: len(other.assignment()) == 4, timeout=15)  # stuck does not poll
    stuck.poll(0)
    assert stuck_listener.calls[-1][0] == "lost"
    drive([stuck, other], lambda: len(stuck.assignment()) == 2 and len(other.assignment()) == 2)


def test_static_member_sends_no_leave_group_and_gets_its_partitions_back(make_consumer, cluster):
    group = new_group()
    # A session long enough that neither member expires while the other restarts, even on a busy machine: a
    # rebalance must then come from a LeaveGroup or a new member id, which static membership rules out.
    static = {"group": group, "session_timeout_ms": 10_000}
    members = [make_consumer("t", group_instance_id=f"static-{i}", **static) for i in range(2)]
    drive(members, lambda: all(len(m.assignment()) == 2 for m in members))
    before = describe(cluster, group)
    kept = members[0].assignment()
    members[0].close()
    still = describe(cluster, group)
    assert {m["group_instance_id"] for m in still["members"]} == {"static-0", "static-1"}  # no LeaveGroup
    restarted = make_consumer("t", group_instance_id="static-0", **static)
    drive([restarted, members[1]], lambda: restarted.assignment() == kept)
    assert restarted.metrics()["rebalance-total"] == 1  # its own join; the group did not rebalance
    assert members[1].metrics()["rebalance-total"] == 1
    assert describe(cluster, group)["group_state"] == before["group_state"] == "Stable"


def test_a_second_consumer_with_the_same_instance_id_fences_the_first_with_a_clear_error(make_consumer):
    group = new_group()
    first = make_consumer("t", group=group, group_instance_id="only-one")
    drive([first], lambda: len(first.assignment()) == 4)
    second = make_consumer("t", group=group, group_instance_id="only-one")
    with pytest.raises(FencedInstanceIdError, match="only-one"):
        drive([first, second], lambda: False, timeout=10)
    with pytest.raises(FencedInstanceIdError):
        first.poll(0)  # fatal: every later call says so too


def test_manual_assignment_commits_as_generation_minus_one_without_joining(make_consumer, cluster):
    group = new_group()
    consumer = make_consumer(group=group, enable_auto_commit=False, source=SyntheticSource(initial_records=100))
    consumer.assign([T[0], T[1]])
    consumer.seek(T[0], 5)  # offsets kept outside zkcoord: the user says where to start
    records = {}
    while sum(len(r) for r in records.values()) < 10:
        for tp, batch in consumer.poll(100).items():
            records.setdefault(tp, []).extend(batch)
    assert records[T[0]][0].offset == 5
    consumer.commit({T[0]: 42})
    assert consumer.committed(T[0]) == 42
    described = describe(cluster, group)
    assert described["group_state"] == "Empty" and described["members"] == []
    with pytest.raises(IllegalStateError):
        consumer.subscribe(["t"])
    without_group = make_consumer()
    without_group.assign([T[2]])
    assert without_group.poll(200)
    with pytest.raises(ConfigError, match="group.id"):
        without_group.commit()


def test_commit_after_the_group_moved_on_raises_commit_failed(make_consumer):
    group = new_group()
    first = make_consumer("t", group=group, enable_auto_commit=False, max_poll_interval_ms=1500)
    drive([first], lambda: len(first.assignment()) == 4)
    second = make_consumer("t", group=group, max_poll_interval_ms=1500)
    drive([second], lambda: len(second.assignment()) == 4, timeout=15)  # first was evicted meanwhile
    with pytest.raises(CommitFailedError, match="rebalanced"):
        first.commit({T[0]: 1})


def test_wakeup_interrupts_poll(make_consumer):
    consumer = make_consumer("t", group=new_group())
    consumer.wakeup()
    with pytest.raises(WakeupError):
        consumer.poll(5000)


def test_cooperative_members_keep_consuming_unmoved_partitions_through_a_rebalance(make_consumer):
    group = new_group()
    options = {"partition_assignment_strategy": "cooperative-sticky"}
    listeners = [Recorder(), Recorder()]
    members = []
    for listener in listeners:
        member = make_consumer(group=group, **options)
        member.subscribe(["t"], listener=listener)
        members.append(member)
    drive(members, lambda: all(len(m.assignment()) == 2 for m in members))
    before = [m.assignment() for m in members]
    for listener in listeners:
        listener.revoked.clear()  # the two may have needed two rounds to settle; count only the newcomer's
    third = make_consumer("t", group=group, **options)
    everyone = [*members, third]
    drive(everyone, lambda: sorted(len(m.assignment()) for m in everyone) == [1, 1, 2])
    moved = 0
    for member, listener, owned_before in zip(members, listeners, before, strict=True):
        kept = owned_before & member.assignment()
        assert not kept & listener.revoked  # kept partitions were never revoked, so never stopped being consumed
        moved += len(listener.revoked)
    assert moved == 1  # only the partition the newcomer needed


def test_pattern_subscription_and_zookeeper_discovery(make_consumer, cluster):
    consumer = make_consumer(group=new_group(), bootstrap_servers=None, zookeeper_connect=cluster["connect"])
    consumer.subscribe(pattern="t|u")
    drive([consumer], lambda: len(consumer.assignment()) == 6)
    assert consumer.subscription() == {"t", "u"}
    assert consumer.partitions_for_topic("t") == {0, 1, 2, 3}
    assert consumer.partitions_for_topic("missing") is None


def test_metrics_use_kafka_names_and_are_served_to_prometheus(make_consumer):
    port = _free_port()
    consumer = make_consumer("t", group=new_group(), **{"zkcoord.metrics.port": port})
    drive([consumer], lambda: len(consumer.assignment()) == 4)
    consumer.commit()
    metrics = consumer.metrics()
    for name in (
        "join-rate",
        "sync-time-avg",
        "rebalance-latency-avg",
        "rebalance-latency-max",
        "last-heartbeat-seconds-ago",
        "commit-latency-avg",
        "assigned-partitions",
    ):
        assert name in metrics
    assert metrics["assigned-partitions"] == 4 and metrics["commit-total"] >= 1
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "kafka_consumer_coordinator_assigned_partitions" in text


def test_iteration_yields_records_in_offset_order_per_partition(make_consumer):
    source = SyntheticSource(rate_per_partition=0, initial_records=5)
    consumer = make_consumer(group=new_group(), source=source, consumer_timeout_ms=1500)
    consumer.assign(T)
    seen = {}
    for record in consumer:
        seen.setdefault(record.partition, []).append(record.offset)
    assert seen == {p: [0, 1, 2, 3, 4] for p in range(4)}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_source_failing_on_one_partition_loses_no_record_of_another(make_consumer):
    """The round's records fetched before the failure are handed out, not dropped behind advanced positions."""

    class FailsOnce(SyntheticSource):
        failed = False

        def fetch(self, partition, offset, max_records):
            if partition == T[1] and not self.failed:
                self.failed = True
                raise SourceError("broker gone for a moment")
            return super().fetch(partition, offset, max_records)

    consumer = make_consumer(enable_auto_commit=False, source=FailsOnce(initial_records=30))
    consumer.assign([T[0], T[1]])
    first = consumer.poll(100)
    assert list(first) == [T[0]] and first[T[0]][0].offset == 0
    offsets = {tp: [r.offset for r in batch] for tp, batch in first.items()}
    while sum(map(len, offsets.values())) < 60:
        for tp, batch in consumer.poll(100).items():
            offsets.setdefault(tp, []).extend(r.offset for r in batch)
    assert offsets == {T[0]: list(range(30)), T[1]: list(range(30))}


def test_records_of_partitions_revoked_while_the_source_answered_are_not_handed_out(make_consumer):
    """Java's fetcher drops what it fetched for a partition no longer assigned: poll() returns no record of a
    partition the rebalance took away while the source was answering."""
    fetching, release = threading.Event(), threading.Event()

    class Held(SyntheticSource):
        hold = False

        def fetch(self, partition, offset, max_records):
            if self.hold:
                fetching.set()
                release.wait(10)
            return super().fetch(partition, offset, max_records)

    group = new_group()
    source = Held(initial_records=30)
    first = make_consumer("t", group=group, enable_auto_commit=False, source=source)
    drive([first], lambda: len(first.assignment()) == 4)
    source.hold = True
    polled = {}
    poller = threading.Thread(target=lambda: polled.update(first.poll(0)))
    poller.start()
    try:
        assert fetching.wait(10)
        make_consumer("t", group=group)  # joins: first's worker hands over an eager revocation of everything
        deadline = time.monotonic() + 10
        while first.member_state != "REVOKING_PARTITIONS":
            assert time.monotonic() < deadline, first.member_state
            time.sleep(0.01)
    finally:
        source.hold = False
        release.set()
        poller.join(10)
    assert polled == {} and first.assignment() == set()
