"""``zkcoord lag`` as an operator runs it, over the real Kafka broker: groups of each Burrow status (lagging,
stalled, stopped, rewinding, and one keeping up) built for each kind (legacy offsets in ZooKeeper, a coordinator
group, a migrating group whose readers read the log, one migrated back whose readers read ZooKeeper, a mixed
DUAL_WRITE group whose readers read the larger of both), observed once per simulated minute through
``--state-file`` with a clock the test moves; ``--watch``; ``lag serve`` scraped by Prometheus' parser; exit
codes (docs/lag.md)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families
from test_admin import commit, form_group

from zkcoord.cli import lag as lag_cli
from zkcoord.cli import lag_serve, main
from zkcoord.clock import ManualClock
from zkcoord.migration import store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.testing.node_process import HOST, NodeProcess
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout
from zkcoord.zk.server import free_port

ROOT = "/zkcoord-lag"  # this module's node and migration states, apart from other modules' on the broker's chroot
NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 4000,
    "zkcoord.root": ROOT,
}
MINUTE_MS = 60_000
RECORDS_PER_MINUTE = 20
# Per scenario, the offset committed at each of four observations (the log end is 20, 40, 60, 80 then), and
# whether a live member owns the partition; then the group's status and the partition's.
SCENARIOS = {
    "ok": ((20, 40, 60, 80), True, "OK", "OK"),
    "lagging": ((5, 10, 15, 20), True, "WARN", "WARN"),
    "stalled": ((5, 5, 5, 5), True, "ERR", "STALL"),
    "stopped": ((5, 10, 10, 10), False, "ERR", "STOP"),
    "rewinding": ((30, 35, 8, 9), True, "ERR", "REWIND"),
}


@pytest.fixture(scope="module")
def node(kafka, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("lag")
    started = NodeProcess(1, kafka.zk_connect, workdir / "log", NODE_OVERRIDES, workdir)
    try:
        started.wait_serving()
        yield started
    finally:
        started.stop()


@pytest.fixture
def zk(kafka):
    client = KazooClient(hosts=kafka.zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def clock(monkeypatch):
    manual = ManualClock(1_800_000_000_000)
    monkeypatch.setattr(lag_cli, "CLOCK", manual)
    return manual


@pytest.fixture
def topic(kafka):
    name = f"lag-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, 1)
    return name


def lag(capsys, kafka, *args: str) -> tuple[int, str, str]:
    """``zkcoord lag --zookeeper <broker's chroot> --root ROOT ARGS`` in process: exit code, stdout, stderr."""
    code = main(["lag", "--zookeeper", kafka.zk_connect, "--root", ROOT, "--timeout", "10000", *args])
    out, err = capsys.readouterr()
    return code, out, err


class LegacyGroup:
    """A 0.8.2 group as ZooKeeper holds it: a registered consumer owning partition 0 (when owned), offsets."""

    def __init__(self, zk: KazooClient, name: str, topic: str, owned: bool):
        self.zk, self.name, self.topic = zk, name, topic
        if owned:
            consumer = f"{name}_c1"
            registration = layout.ConsumerRegistration({topic: 1}, timestamp_ms=1)
            zk.create(
                layout.consumer_path(name, consumer), layout.encode_consumer_registration(registration), makepath=True
            )
            zk.create(layout.owner_path(name, topic, 0), layout.encode_owner(f"{consumer}-0"), makepath=True)

    def commit(self, offset: int) -> None:
        """As 0.8.2's commitOffsets: the znode is written only when the offset changed."""
        path = layout.offset_path(self.name, self.topic, 0)
        self.zk.ensure_path(path)
        if self.zk.get(path)[0] != layout.encode_offset(offset):
            self.zk.set(path, layout.encode_offset(offset))


class CoordinatorGroup:
    """A group on the node: a static member assigned partition 0 (when owned) that commits, else simple commits."""

    def __init__(self, node: NodeProcess, name: str, topic: str, owned: bool):
        self.address, self.name, self.topic = node.address, name, topic
        self.member = None
        if owned:
            member_id = form_group(self.address, name, {"m": (topic,)}, {"m": {topic: [0]}})["m"]
            self.member = (member_id, "m", 1)

    def commit(self, offset: int) -> None:
        commit(self.address, self.name, {(self.topic, 0): offset}, self.member)


class MigratingGroup(CoordinatorGroup):
    """A group in LOG_PRIMARY: its readers read the log; ZooKeeper keeps an offset (50) no reader uses."""

    def __init__(self, node: NodeProcess, zk: KazooClient, name: str, topic: str, owned: bool):
        zk.create(layout.offset_path(name, topic, 0), layout.encode_offset(50), makepath=True)
        store.write_state(zk, ROOT, name, MigrationState(Phase.LOG_PRIMARY, epoch=1), store.NO_VERSION)
        super().__init__(node, name, topic, owned)


def rolled_back_group(node, zk: KazooClient, name: str, topic: str, owned: bool) -> LegacyGroup:
    """A group migrated back to ZK_ONLY: its readers read ZooKeeper, and the log keeps an offset (50) from before
    (a group in both places whose coordinator side is not what its members read)."""
    commit(node.address, name, {(topic, 0): 50})
    store.write_state(zk, ROOT, name, MigrationState(Phase.ZK_ONLY, epoch=2), store.NO_VERSION)
    return LegacyGroup(zk, name, topic, owned)


def mixed_group(kafka, zk: KazooClient, name: str, topic: str, owned: bool) -> LegacyGroup:
    """A legacy group taken to DUAL_WRITE by ``zkcoord migrate``: one group of both kinds (the bridge), whose
    readers read the larger of ZooKeeper's offset and the log's; its members commit to ZooKeeper, as 0.8.2's do."""
    group = LegacyGroup(zk, name, topic, owned)
    group.commit(0)
    command = ["migrate", "up", "--group", name, "--to", "0001_dual_commit", "--zookeeper", kafka.zk_connect]
    assert main([*command, "--root", ROOT]) == 0
    assert store.read_bridge(zk, ROOT, name) is not None
    return group


def build_groups(kind: str, kafka, node, zk, topic: str) -> dict[str, object]:
    groups = {}
    for scenario, (_, owned, _, _) in SCENARIOS.items():
        name = f"{kind}-{scenario}-{topic}"
        if kind == "legacy":
            groups[scenario] = LegacyGroup(zk, name, topic, owned)
        elif kind == "rolled-back":
            groups[scenario] = rolled_back_group(node, zk, name, topic, owned)
        elif kind == "mixed":
            groups[scenario] = mixed_group(kafka, zk, name, topic, owned)
        elif kind == "coordinator":
            groups[scenario] = CoordinatorGroup(node, name, topic, owned)
        else:
            groups[scenario] = MigratingGroup(node, zk, name, topic, owned)
    return groups


@pytest.mark.parametrize("kind", ["legacy", "coordinator", "migrating", "rolled-back", "mixed"])
def test_each_status_of_each_kind_of_group(capsys, kafka, node, zk, clock, topic, tmp_path, kind):
    groups = build_groups(kind, kafka, node, zk, topic)
    expected = {scenario: (group_status, status) for scenario, (*_, group_status, status) in SCENARIOS.items()}
    if kind in ("legacy", "rolled-back"):
        # Readers read ZooKeeper, where a stalled 0.8.2 consumer writes nothing: it stopped, as Burrow says.
        expected["stalled"] = ("ERR", "STOP")
    if kind == "mixed":
        # The log holds 35 from the start: readers take the larger offset, so ZooKeeper's rewind is not theirs.
        commit(node.address, groups["rewinding"].name, {(topic, 0): 35})
        expected["rewinding"] = ("OK", "OK")
    capsys.readouterr()
    state = str(tmp_path / "lag-state.json")
    selected = [option for group in groups.values() for option in ("--group", group.name)]
    for minute in range(4):
        kafka.produce(topic, [b"r"] * RECORDS_PER_MINUTE, partition=0)
        for scenario, group in groups.items():
            group.commit(SCENARIOS[scenario][0][minute])
        code, out, err = lag(capsys, kafka, "--state-file", state, "--json", *selected)
        assert "error" not in err, err
        clock.advance(MINUTE_MS)
    documents = {document["group"]: document for document in json.loads(out)}
    statuses = {
        scenario: (documents[group.name]["status"], documents[group.name]["partitions"][0]["status"])
        for scenario, group in groups.items()
    }
    assert statuses == expected
    assert documents[groups["lagging"].name]["totallag"] == 60
    assert code == 1

    # The table, and an all-OK selection exits 0.
    code, out, _ = lag(capsys, kafka, "--state-file", state, "--group", groups["ok"].name)
    assert code == 0
    assert out.split("\n")[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "STATUS",
    ]
    assert out.split("\n")[1].split() == [groups["ok"].name, topic, "0", "80", "80", "0", "OK"]
    assert f"Group {groups['ok'].name}: OK (total lag 0" in out


def test_one_observation_says_what_it_cannot_tell_and_unknown_groups_are_notfound(capsys, kafka, zk, topic):
    stalled = LegacyGroup(zk, f"one-shot-{topic}", topic, owned=True)
    kafka.produce(topic, [b"r"] * 5, partition=0)
    stalled.commit(2)
    code, out, err = lag(capsys, kafka, "--group", stalled.name, "--group", f"nowhere-{topic}")
    assert code == 1  # the unknown group
    assert f"{stalled.name}  {topic}  0          2               5               3    OK" in out
    assert f"Group nowhere-{topic}: NOTFOUND" in out
    assert "one observation shows no trend" in err


def test_a_group_that_never_committed_is_shown_but_not_counted_in_the_exit_code(capsys, kafka, zk, topic):
    registered = LegacyGroup(zk, f"uncommitted-{topic}", topic, owned=True)
    code, out, _ = lag(capsys, kafka, "--group", registered.name)
    assert (code, out.strip()) == (
        0,
        f"Group {registered.name}: NOTFOUND (it exists but has committed no offset; not counted in the exit code)",
    )


def test_a_migration_state_that_cannot_be_read_is_warned_of(capsys, kafka, zk, topic):
    garbled = LegacyGroup(zk, f"garbled-{topic}", topic, owned=False)
    kafka.produce(topic, [b"r"] * 5, partition=0)
    garbled.commit(2)
    zk.create(layout.migration_path(ROOT, garbled.name), b"{not json", makepath=True)
    _, _, err = lag(capsys, kafka)
    assert "WARN: " in err and f"READS-FROM of group '{garbled.name}' are unknown" in err


def test_watch_builds_the_window_across_iterations(capsys, kafka, zk, clock, topic, monkeypatch):
    stuck = LegacyGroup(zk, f"watched-{topic}", topic, owned=True)
    kafka.produce(topic, [b"r"] * 5, partition=0)
    stuck.commit(2)
    monkeypatch.setattr(lag_cli.time, "sleep", lambda seconds: clock.advance(int(seconds * 1000)))
    code, out, err = lag(capsys, kafka, "--group", stuck.name, "--watch", "60", "--iterations", "3")
    assert (code, err) == (1, "")
    assert [line for line in out.splitlines() if line.startswith("Group")] == [
        f"Group {stuck.name}: OK (total lag 3, max lag 3 on {topic}-0)",
        f"Group {stuck.name}: ERR (total lag 3, max lag 3 on {topic}-0)",
        f"Group {stuck.name}: ERR (total lag 3, max lag 3 on {topic}-0)",
    ]
    assert out.count("STOP") == 2  # a 0.8.2 consumer that wrote its offset once

    def interrupt(_seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(lag_cli.time, "sleep", interrupt)
    code, _, err = lag(capsys, kafka, "--group", stuck.name, "--watch", "60")
    assert (code, err) == (130, "interrupted; nothing was changed (zkcoord lag only reads)\n")
    code, _, err = lag(capsys, kafka, "--group", stuck.name, "--watch", "--iterations", "0")
    assert (code, err) == (2, "error: --iterations takes a number of at least 1, with --watch\n")


@pytest.mark.parametrize("interval", [["--watch", "-1"], ["--watch", "0"], ["serve", "--port", "1", "--interval", "0"]])
def test_an_interval_that_is_not_positive_is_a_usage_error(capsys, interval):
    with pytest.raises(SystemExit) as exit_:
        main(["lag", "--zookeeper", "127.0.0.1:1", *interval])
    assert exit_.value.code == 2
    assert "is not a positive number of seconds" in capsys.readouterr().err


def test_unreachable_brokers_are_a_connection_error(capsys, kafka, zk_connect):
    # A chroot where brokers are registered that do not answer.
    dead = KazooClient(hosts=zk_connect)
    dead.start(timeout=15)
    try:
        dead.create(layout.offset_path("g", "t", 0), layout.encode_offset(1), makepath=True)
        code, _, err = lag(capsys, kafka, "--group", "g", "--zookeeper", zk_connect)
        assert (code, err.strip()) == (2, f"error: no broker is registered under /brokers/ids (ZooKeeper {zk_connect})")
        port = free_port(HOST)
        dead.create(
            layout.broker_path(1), json.dumps({"version": 1, "host": HOST, "port": port}).encode(), makepath=True
        )
        code, _, err = lag(capsys, kafka, "--group", "g", "--zookeeper", zk_connect, "--timeout", "2000")
        assert code == 2 and err.startswith("error: no broker registered under /brokers/ids answers")
        assert len(err.strip().splitlines()) == 1
    finally:
        dead.stop()
        dead.close()


def test_coordinator_groups_missing_while_no_coordinator_is_registered_are_a_connection_error(
    capsys, kafka, node, topic, tmp_path
):
    group = CoordinatorGroup(node, f"remembered-{topic}", topic, owned=False)
    group.commit(0)
    state = str(tmp_path / "lag-state.json")
    code, out, _ = lag(capsys, kafka, "--state-file", state, "--group", group.name)
    assert (code, f"Group {group.name}: OK" in out) == (0, True)
    # The whole coordinator cluster down past its sessions: no node registered (here, under another root).
    down = f"{ROOT}-down"
    code, out, err = lag(capsys, kafka, "--state-file", state, "--group", group.name, "--root", down)
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"error: no coordinator node is registered under {down} in ZooKeeper at {kafka.zk_connect}; "
        f"cannot read coordinator group(s) {group.name}"
    )
    assert group.name in json.loads((tmp_path / "lag-state.json").read_text())["coordinator_groups"]


def test_describe_reads_the_log_end_from_the_brokers(capsys, kafka, zk, topic):
    group = LegacyGroup(zk, f"described-{topic}", topic, owned=False)
    kafka.produce(topic, [b"r"] * 7, partition=0)
    group.commit(3)
    gone = f"gone-{topic}"  # offsets of a topic the brokers do not have (deleted since)
    zk.create(layout.offset_path(group.name, gone, 0), layout.encode_offset(1), makepath=True)
    code = main(["groups", "--zookeeper", kafka.zk_connect, "--root", ROOT, "describe", "--group", group.name])
    out, err = capsys.readouterr()
    assert code == 0, err
    # TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG, without --source
    assert re.search(rf"\b{topic}\s+0\s+3\s+7\s+4\s", out), out
    assert re.search(rf"\b{gone}\s+0\s+1\s+-\s+-\s", out), out
    assert "WARN" not in err


def test_serve_answers_burrow_json_and_kafka_exporter_metrics(kafka, zk, topic):
    lagging = LegacyGroup(zk, f"served-{topic}", topic, owned=True)
    kafka.produce(topic, [b"r"] * 9, partition=0)
    lagging.commit(4)
    port = free_port(HOST)
    command = [sys.executable, "-m", "zkcoord.cli", "lag", "serve", "--port", str(port), "--interval", "0.2"]
    command += ["--zookeeper", kafka.zk_connect, "--root", ROOT, "--group", lagging.name, "--cluster", "local"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://{HOST}:{port}"

        def stopped() -> dict | None:
            try:
                with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
                    text = answer.read().decode()
            except OSError:
                return None
            families = {family.name: family for family in text_string_to_metric_families(text)}
            partition = families["zkcoord_consumergroup_partition_status"].samples
            return families if any(s.labels["status"] == "STOP" and s.value == 1 for s in partition) else None

        # Its offset written once and not since: from the second evaluation on, the partition is STOP.
        families = wait_until(stopped, timeout=30, what="the partition to be STOP")
        labels = {"consumergroup": lagging.name, "topic": topic, "partition": "0"}
        samples = {
            name: [(s.labels, s.value) for s in families[name].samples]
            for name in (
                "kafka_consumergroup_lag",
                "kafka_consumergroup_current_offset",
                "kafka_consumergroup_lag_sum",
                "kafka_consumergroup_members",
            )
        }
        assert samples == {
            "kafka_consumergroup_lag": [(labels, 5.0)],
            "kafka_consumergroup_current_offset": [(labels, 4.0)],
            "kafka_consumergroup_lag_sum": [({"consumergroup": lagging.name, "topic": topic}, 5.0)],
            "kafka_consumergroup_members": [({"consumergroup": lagging.name}, 1.0)],
        }
        group_status = {s.labels["status"]: s.value for s in families["zkcoord_consumergroup_status"].samples}
        assert group_status == {"OK": 0.0, "WARN": 0.0, "ERR": 1.0}

        with urllib.request.urlopen(f"{base}/v3/kafka/local/consumer/{lagging.name}/status", timeout=5) as answer:
            document = json.load(answer)
        assert document["status"]["status"] == "ERR"
        assert [(p["topic"], p["status"], p["current_lag"]) for p in document["status"]["partitions"]] == [
            (topic, "STOP", 5)
        ]
        with urllib.request.urlopen(f"{base}/v3/kafka/local/consumer", timeout=5) as answer:
            assert json.load(answer)["consumers"] == [lagging.name]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/v3/kafka/local/consumer/nobody/status", timeout=5)
        assert missing.value.code == 404
        assert json.load(missing.value)["status"]["status"] == "NOTFOUND"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 130
    assert err.strip() == "interrupted; nothing was changed (zkcoord lag only reads)"


def test_serve_keeps_evaluating_after_any_failure_and_is_not_ready_once_its_numbers_are_stale(capsys):
    failing = threading.Event()

    class FailingEvaluation:
        """Fails with a surprise on its first run, then succeeds until ``failing`` is set."""

        def __init__(self):
            self.calls = 0

        def run(self):
            self.calls += 1
            if self.calls == 1 or failing.is_set():
                raise KeyError("a surprise")
            return []

    evaluation = FailingEvaluation()
    args = argparse.Namespace(cluster="local", host=HOST, port=free_port(HOST), interval=0.05, timeout=0)
    base = f"http://{HOST}:{args.port}"
    default_handler = signal.getsignal(signal.SIGTERM)
    seen = {}

    def probe() -> None:
        try:
            wait_until(lambda: evaluation.calls >= 3, timeout=10, what="evaluations after the failure")
            with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
                families = text_string_to_metric_families(answer.read().decode())
                seen["metrics"] = {s.name: s.value for f in families for s in f.samples if "zkcoord_lag_" in s.name}
            with urllib.request.urlopen(f"{base}/readyz", timeout=5) as answer:
                seen["ready"] = answer.status
            failing.set()
            wait_until(lambda: not_ready(f"{base}/readyz"), timeout=10, what="/readyz to say the numbers are stale")
            seen["stale"] = True
        finally:
            if signal.getsignal(signal.SIGTERM) is not default_handler:  # serve's: never kill the test run
                os.kill(os.getpid(), signal.SIGTERM)

    started = time.time()
    prober = threading.Thread(target=probe)
    prober.start()
    try:
        assert lag_serve.serve(evaluation, [], args) == 0
    finally:
        prober.join(timeout=30)
    assert signal.getsignal(signal.SIGTERM) is default_handler
    assert seen["metrics"]["zkcoord_lag_evaluation_failures_total"] == 1
    assert seen["metrics"]["zkcoord_lag_last_success_timestamp_seconds"] >= started
    assert (seen["ready"], seen["stale"]) == (200, True)
    assert "KeyError: 'a surprise'" in capsys.readouterr().err


def not_ready(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5).close()
    except urllib.error.HTTPError as error:
        return error.code == 503
    return False


def test_serve_reads_group_ids_as_utf8_with_slashes_and_answers_404_for_other_paths():
    import gevent
    from prometheus_client import CollectorRegistry

    from zkcoord.lag import LagWindows, PartitionObservation
    from zkcoord.metrics_http import serve_metrics
    from zkcoord.model import TopicPartition

    groups = ("grüppe", "team/orders", "a/status")
    windows = LagWindows()
    for group in groups:
        windows.observe(group, {TopicPartition("t", 0): PartitionObservation(1, 1, True)}, 0)
    latest = lag_serve.LatestEvaluation("local", [windows.evaluate(group, 0) for group in groups])
    server = serve_metrics(CollectorRegistry(), HOST, 0, documents=latest.document)
    base = f"http://{HOST}:{server.server_port}"

    def get(path: str) -> tuple[int, str | None]:
        try:
            with urllib.request.urlopen(base + path, timeout=5) as answer:
                return answer.status, json.load(answer)["status"]["group"]
        except urllib.error.HTTPError as error:
            return error.code, None

    def ask_all() -> dict[str, tuple[int, str | None]]:
        paths = [f"/v3/kafka/local/consumer/{urllib.parse.quote(group, safe='')}/status" for group in groups]
        return {path: get(path) for path in [*paths, "/v3/kafka/local/consumers", "/favicon.ico"]}

    try:
        answers = gevent.get_hub().threadpool.spawn(ask_all).get(timeout=30)
    finally:
        server.stop()
    assert list(answers.values()) == [
        (200, "grüppe"),
        (200, "team/orders"),
        (200, "a/status"),
        (404, None),
        (404, None),
    ]


def test_serve_is_not_ready_once_its_evaluations_stopped():
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    assert lag_serve.EvaluationHealth(30.0, 10.0, ended).readiness()["ready"] is False
