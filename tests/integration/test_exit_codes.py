"""One exit-code rule for every ``zkcoord`` command, run as an operator runs it: 0 ok, 1 a check failed, 2 usage or
connection error, 130 interrupted (README, "Command line"; docs/operations.md, "Exit codes").

One table: each command in its ok case, its failing check where it has checks, a usage error and a connection error
(ZooKeeper at a closed port, half-second timeouts). Long-running commands are run as processes and stopped with
SIGTERM (ok) or SIGINT (interrupted). ``groups``, ``migrate`` and ``lag`` have modules of their own.
"""

import argparse
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from zkcoord import cli
from zkcoord.admin import legacy_groups
from zkcoord.cli import common
from zkcoord.log import LogConfig, PartitionLog
from zkcoord.offsets.records import OffsetCommitKey, OffsetCommitValue
from zkcoord.offsets.records import encode_record as record
from zkcoord.zk import admin, layout
from zkcoord.zk.server import free_port

CLOSED = "127.0.0.1:1"  # nothing listens there: connecting is refused at once
OK, CHECK_FAILED, USAGE, CONNECTION, INTERRUPTED = "ok", "check failed", "usage", "connection", "interrupted"
EXIT_CODES = {OK: 0, CHECK_FAILED: 1, USAGE: 2, CONNECTION: 2, INTERRUPTED: 130}
MEMBER = b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}'
STOP_WAIT_S = 30


@dataclasses.dataclass
class World:
    """What a case runs against: the test's ZooKeeper chroot, its client and a scratch folder."""

    connect: str
    zk: object
    folder: Path

    def topic(self, name: str = "t", partitions: int = 1) -> None:
        admin.create_topic(self.zk, name, partitions)

    def served_topic(self) -> None:
        """Topic t and a registered broker: a 0.8.2 member claims partitions only while a broker is registered."""
        self.topic()
        admin.register_broker(self.zk, 0, "127.0.0.1", 9092, 0, persistent=True)

    def live_group(self) -> None:
        """Group g: member g_m0 subscribed to t, owning its one partition (as a converged 0.8.2 group)."""
        self.topic()
        self.zk.create(layout.consumer_path("g", "g_m0"), MEMBER, makepath=True)
        self.zk.create(layout.owner_path("g", "t", 0), b"g_m0-0", makepath=True)

    def memberless_group(self) -> None:
        """Group g with a committed offset and no member: what every group looks like after its members left."""
        self.topic()
        self.zk.create(layout.offset_path("g", "t", 0), b"5", makepath=True)

    def log_dir(self) -> Path:
        with PartitionLog.open(self.folder / "log" / "__consumer_offsets-0", LogConfig()) as partition:
            partition.append([record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 1000))])
        return self.folder / "log"

    def torn_log_dir(self) -> Path:
        folder = self.log_dir()
        with open(sorted((folder / "__consumer_offsets-0").glob("*.log"))[-1], "ab") as segment:
            segment.write(b"\x00\x00\x01")  # a length cut short: verify and dump report it
        return folder

    def offsets_file(self, text: str) -> Path:
        path = self.folder / "offsets.txt"
        path.write_text(text)
        return path

    def unanswering_node(self) -> None:
        """A coordinator node registered at a port nothing listens on."""
        path = layout.coordinator_node_path(layout.DEFAULT_ROOT, 1)
        self.zk.create(path, layout.encode_coordinator_node("127.0.0.1", 1), makepath=True)


@dataclasses.dataclass(frozen=True)
class Case:
    command: str
    outcome: str
    argv: Callable[[World], list]
    said: str = ""  # a part of what the command writes (stdout and stderr) in this case


def zk_(world: World) -> list[str]:
    return ["--zookeeper", world.connect]


def closed(*_) -> list[str]:
    return ["--zookeeper", CLOSED]


CASES = [
    Case("zk start", USAGE, lambda w: ["zk", "start", "--port", "x"], "invalid int value"),
    Case("zk secure", USAGE, lambda w: ["zk", "secure", *zk_(w)], "needs ZooKeeper credentials"),
    Case("topics create", OK, lambda w: ["topics", "create", "t", "--partitions", "1", *zk_(w)]),
    Case("topics create", USAGE, lambda w: ["topics", "create", "t", *zk_(w)], "--partitions"),
    Case("topics create", CONNECTION, lambda w: ["topics", "create", "t", "--partitions", "1", *closed()]),
    Case("topics list", OK, lambda w: (w.topic(), ["topics", "list", *zk_(w)])[1], "t"),
    Case("topics list", USAGE, lambda w: ["topics", "list", "--zookeeper"], "expected one argument"),
    Case("topics list", CONNECTION, lambda w: ["topics", "list", *closed()], "cannot connect to ZooKeeper"),
    Case(
        "topics alter", OK, lambda w: (w.topic(), ["topics", "alter", "--topic", "t", "--partitions", "2", *zk_(w)])[1]
    ),
    Case(
        "topics alter",
        USAGE,
        lambda w: (w.topic("t", 2), ["topics", "alter", "--topic", "t", "--partitions", "1", *zk_(w)])[1],
        "can only grow",
    ),
    Case("topics alter", CONNECTION, lambda w: ["topics", "alter", "--topic", "t", "--partitions", "2", *closed()]),
    Case(
        "brokers register",
        OK,
        lambda w: ["brokers", "register", "--id", "1", "--host", "h", "--port", "9", "--persistent", *zk_(w)],
    ),
    Case("brokers register", USAGE, lambda w: ["brokers", "register", "--id", "1", "--host", "h", *zk_(w)], "--port"),
    Case(
        "brokers register",
        CONNECTION,
        lambda w: ["brokers", "register", "--id", "1", "--host", "h", "--port", "9", *closed()],
    ),
    Case("peers fetch", USAGE, lambda w: ["peers", "fetch", "--offline"], "unrecognized arguments"),
    Case("kafka start", USAGE, lambda w: ["kafka", "start"], "no ZooKeeper given"),
    Case("kafka produce", USAGE, lambda w: ["kafka", "produce", "--bootstrap-server", "h:1"], "--topic"),
    Case(
        "legacy run",
        OK,
        lambda w: (
            w.served_topic(),
            ["legacy", "run", "--group", "g", "--topics", "t", "--source", "synthetic", "--max-messages", "3", *zk_(w)],
        )[1],
        "Consumed 3 messages",
    ),
    Case(
        "legacy run",
        USAGE,
        lambda w: [
            "legacy",
            "run",
            "--group",
            "g",
            "--topics",
            "t",
            "--source",
            "synthetic",
            "--consumer-property",
            "partition.assignment.strategy=roundrobn",
            *zk_(w),
        ],
        "partition.assignment.strategy=roundrobn is not valid: use range or roundrobin",
    ),
    Case(
        "legacy run",
        CONNECTION,
        lambda w: ["legacy", "run", "--group", "g", "--topics", "t", *closed()],
        "cannot connect",
    ),
    Case(
        "legacy verify",
        OK,
        lambda w: (w.live_group(), ["legacy", "verify", "--group", "g", *zk_(w)])[1],
        "Rebalance verified",
    ),
    Case(
        "legacy verify",
        CHECK_FAILED,
        lambda w: (w.memberless_group(), ["legacy", "verify", "--group", "g", *zk_(w)])[1],
        "consumer group g has no live member",
    ),
    Case("legacy verify", USAGE, lambda w: ["legacy", "verify", *zk_(w)], "--group"),
    Case("legacy verify", CONNECTION, lambda w: ["legacy", "verify", "--group", "g", *closed()]),
    Case(
        "legacy offsets export", OK, lambda w: (w.memberless_group(), ["legacy", "offsets", "export", *zk_(w)])[1], ":5"
    ),
    Case("legacy offsets export", USAGE, lambda w: ["legacy", "offsets", "export", "--output"], "expected one"),
    Case("legacy offsets export", CONNECTION, lambda w: ["legacy", "offsets", "export", *closed()]),
    Case(
        "legacy offsets import",
        OK,
        lambda w: ["legacy", "offsets", "import", "--input", w.offsets_file("/consumers/g/offsets/t/0:7\n"), *zk_(w)],
        "Imported 1 offsets",
    ),
    Case(
        "legacy offsets import",
        USAGE,
        lambda w: ["legacy", "offsets", "import", "--input", w.offsets_file("junk\n"), *zk_(w)],
    ),
    Case(
        "legacy offsets import",
        CONNECTION,
        lambda w: ["legacy", "offsets", "import", "--input", w.offsets_file("/consumers/g/offsets/t/0:7\n"), *closed()],
    ),
    Case("log verify", OK, lambda w: ["log", "verify", w.log_dir()], "ok"),
    Case("log verify", CHECK_FAILED, lambda w: ["log", "verify", w.torn_log_dir()], "torn tail"),
    Case("log verify", USAGE, lambda w: ["log", "verify", w.folder], "holds no partition directory"),
    Case("log verify", CONNECTION, lambda w: ["log", "verify", w.log_dir(), *closed()], "cannot connect"),
    Case("log dump", OK, lambda w: ["log", "dump", w.log_dir()], "baseOffset: 0"),
    Case("log dump", CHECK_FAILED, lambda w: ["log", "dump", w.torn_log_dir()], "torn tail"),
    Case("log dump", USAGE, lambda w: ["log", "dump", w.folder / "none"]),
    Case("log compact", OK, lambda w: ["log", "compact", w.log_dir()], "nothing to compact"),
    Case("log compact", USAGE, lambda w: ["log", "compact"], "path"),
    Case("log load", OK, lambda w: ["log", "load", w.log_dir()], "CURRENT-OFFSET"),
    Case("log load", USAGE, lambda w: ["log", "load", w.folder / "none"]),
    Case("log raise-epoch", OK, lambda w: ["log", "raise-epoch", w.log_dir(), "--dry-run", *zk_(w)]),
    Case("log raise-epoch", USAGE, lambda w: ["log", "raise-epoch", w.log_dir()], "no ZooKeeper given"),
    Case("log raise-epoch", CONNECTION, lambda w: ["log", "raise-epoch", w.log_dir(), *closed()]),
    Case(
        "coordinator start",
        USAGE,
        lambda w: [
            "coordinator",
            "start",
            "--node-id",
            "1",
            "--log-dir",
            w.folder,
            "--override",
            "group.max.size=0",
            *zk_(w),
        ],
        "group.max.size=0 is not valid: use a number >= 1",
    ),
    Case(
        "coordinator start",
        CONNECTION,
        lambda w: [
            "coordinator",
            "start",
            "--node-id",
            "1",
            "--port",
            "0",
            "--log-dir",
            w.folder,
            "--override",
            "zookeeper.connection.timeout.ms=500",
            *closed(),
        ],
        "no ZooKeeper session with 127.0.0.1:1 within 500 ms",
    ),
    Case(  # ok with a node that answers: test_coordinator_server
        "coordinator status",
        CHECK_FAILED,
        lambda w: ["coordinator", "status", *zk_(w)],
        "error: no coordinator node is registered under /zkcoord",
    ),
    Case("coordinator status", USAGE, lambda w: ["coordinator", "status", "--root"], "expected one argument"),
    Case(
        "coordinator status",
        CONNECTION,
        lambda w: (w.unanswering_node(), ["coordinator", "status", *zk_(w)])[1],
        "node 1 at 127.0.0.1:1 did not answer",
    ),
    Case("coordinator status", CONNECTION, lambda w: ["coordinator", "status", *closed()], "cannot connect"),
    Case("acls", OK, lambda w: ["acls", "--list", *zk_(w)]),
    Case("acls", USAGE, lambda w: ["acls", "--add", "--topic", "t", *zk_(w)], "--allow-principal"),
    Case("acls", CONNECTION, lambda w: ["acls", "--list", "--authorizer-properties", f"zookeeper.connect={CLOSED}"]),
    Case("users", OK, lambda w: ["users", "--describe", *zk_(w)]),
    Case("users", USAGE, lambda w: ["users", "--alter", *zk_(w)], "--entity-name"),
    Case("users", CONNECTION, lambda w: ["users", "--describe", *closed()]),
    Case("groups list", CONNECTION, lambda w: ["groups", "list", *closed()], "cannot connect to ZooKeeper"),
    Case(
        "groups describe",
        CONNECTION,
        lambda w: ["groups", "describe", "--group", "g", *closed()],
        "cannot connect to ZooKeeper",
    ),
    Case(
        "compare run", USAGE, lambda w: ["compare", "run", "--scenario", "nope", "--out", w.folder], "unknown scenario"
    ),
    Case("pipeline", USAGE, lambda w: ["pipeline"], "job"),
    Case("faults run", USAGE, lambda w: ["faults", "run", "--runs", "x"], "invalid int value"),
    Case("demo", USAGE, lambda w: ["demo", "--members", "x"], "invalid int value"),
]


@pytest.fixture
def world(zk, zk_connect, tmp_path, monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    monkeypatch.setattr(common, "CONNECT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(legacy_groups, "ZOOKEEPER_CONNECT_TIMEOUT_S", 0.5)
    return World(zk_connect, zk, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[f"{case.command}: {case.outcome}" for case in CASES])
def test_exit_code(case, world, capsys):
    argv = [str(arg) for arg in case.argv(world)]
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == EXIT_CODES[case.outcome], f"zkcoord {' '.join(argv)}\n{out}\n{err}"
    assert case.said in out + err
    assert "Traceback" not in err


def test_every_command_is_in_the_table_or_tested_elsewhere():
    [commands] = [action for action in cli.build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    tested_elsewhere = {"groups", "migrate", "lag"}  # test_admin*, test_migrate_cli, the lag command's tests
    assert set(commands.choices) - tested_elsewhere <= {case.command.split()[0] for case in CASES}


# -- long-running commands, as processes ------------------------------------------------------------------------


def spawn(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "zkcoord.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def stop(process: subprocess.Popen, signum: int, ready: str) -> tuple[int, str, str]:
    """Wait for ``ready`` on the process's standard output, send ``signum``; its exit code, stdout and stderr."""
    try:
        lines = []
        while ready not in "".join(lines):
            lines.append(process.stdout.readline())
            assert lines[-1] and len(lines) < 100, "".join(lines) + process.stderr.read()
        process.send_signal(signum)
        out, err = process.communicate(timeout=STOP_WAIT_S)
        return process.returncode, "".join(lines) + out, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(STOP_WAIT_S)


def test_zk_start_says_its_data_is_temporary_and_stops_ok_on_sigterm():
    code, out, err = stop(
        spawn("zk", "start", "--port", str(free_port("127.0.0.1")), "--tick-time", "100"), signal.SIGTERM, "serving"
    )
    assert code == 0 and "ZooKeeper stopped" in out
    assert "is temporary and removed at exit; keep it with --data-dir DIR" in err


def test_zk_start_keeps_a_data_dir_across_runs_and_says_nothing_of_it(tmp_path):
    data = tmp_path / "zk"
    for _ in range(2):
        process = spawn(
            "zk", "start", "--port", str(free_port("127.0.0.1")), "--data-dir", str(data), "--tick-time", "100"
        )
        code, _, err = stop(process, signal.SIGTERM, "serving")
        assert code == 0 and "temporary" not in err
    assert (data / "data" / "version-2").is_dir()


@pytest.fixture
def own_temp_dir(tmp_path, monkeypatch):
    """Where ``zk start`` makes its temporary data directory, to see it removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_zk_start_on_a_port_in_use_is_one_line_and_2_and_leaves_nothing(own_temp_dir, capsys):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        code = cli.main(["zk", "start", "--port", str(port)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"error: ZooKeeperStartError: cannot serve on 127.0.0.1:{port}: Address already in use\n"
    assert not list(own_temp_dir.iterdir())


def test_zk_start_whose_server_fails_is_one_line_and_2_and_leaves_nothing(own_temp_dir, capsys, monkeypatch):
    monkeypatch.setenv("ZOOKEEPER_CLASSPATH", str(own_temp_dir / "no-jars"))
    code = cli.main(["zk", "start", "--port", str(free_port("127.0.0.1"))])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: ZooKeeperStartError: ZooKeeper exited with code 1 during start-up")
    assert err.count("\n") == 1
    assert not list(own_temp_dir.iterdir())


def test_main_gives_back_the_signal_handlers_it_found(own_temp_dir, capsys):
    """A command's handlers (zk start installs its own before it starts) end with it: a second command in the same
    process, or the caller, gets Ctrl-C as before."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        for _ in range(2):
            assert cli.main(["zk", "start", "--port", str(other.getsockname()[1])]) == 2
            assert {signum: signal.getsignal(signum) for signum in before} == before
    assert "Traceback" not in capsys.readouterr().err


class SigtermNotHandled(Exception):
    """What SIGTERM raises where the command left Python's default (which would end the test process)."""


@pytest.fixture
def sigterm_caught():
    def unhandled(*_):
        raise SigtermNotHandled

    previous = signal.signal(signal.SIGTERM, unhandled)
    yield
    signal.signal(signal.SIGTERM, previous)


def sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_during_legacy_run_start_up_closes_the_member_and_is_0(world, sigterm_caught, monkeypatch, capsys):
    from zkcoord.legacy.consumer import LegacyConsumer

    world.served_topic()
    start = LegacyConsumer.start

    def start_then_sigterm(consumer, *args, **kwargs):
        start(consumer, *args, **kwargs)
        sigterm_self()  # before the readers' stop event is installed: still the start-up

    monkeypatch.setattr(LegacyConsumer, "start", start_then_sigterm)
    run = ["legacy", "run", "--group", "g", "--topics", "t", "--source", "synthetic", "--zookeeper", world.connect]
    assert cli.main(run) == 0
    assert "interrupted" not in capsys.readouterr().err
    assert not world.zk.get_children(layout.ids_path("g"))


def test_sigterm_during_faults_run_stops_after_the_cleanup_under_way_and_is_0(
    tmp_path, sigterm_caught, monkeypatch, capsys
):
    from zkcoord.faults import campaign
    from zkcoord.interrupts import signals_held

    cleaned = []

    def run_campaign(options):
        with signals_held():  # a run's cleanup: the stop waits for it
            sigterm_self()
            cleaned.append(True)
        raise AssertionError("SIGTERM did not stop the campaign")

    monkeypatch.setattr(campaign, "run_campaign", run_campaign)
    assert cli.main(["faults", "run", "--out", str(tmp_path)]) == 0
    assert cleaned == [True]
    assert "interrupted" not in capsys.readouterr().err


def test_ctrl_c_during_zk_start_is_one_line_and_130():
    code, _, err = stop(
        spawn("zk", "start", "--port", str(free_port("127.0.0.1")), "--tick-time", "100"), signal.SIGINT, "serving"
    )
    assert code == 130
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err


def test_ctrl_c_during_legacy_run_leaves_the_group_and_is_130(zk, zk_connect, tmp_path):
    World(zk_connect, zk, tmp_path).served_topic()
    process = spawn(
        "legacy", "run", "--group", "g", "--topics", "t", "--source", "synthetic", "--zookeeper", zk_connect
    )
    code, out, err = stop(process, signal.SIGINT, "rebalance attempt 1 (startup): success")
    assert code == 130, out
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err
    assert not zk.get_children(layout.ids_path("g"))


def test_coordinator_start_stops_ok_on_sigterm_and_130_on_ctrl_c(zk_connect, tmp_path):
    for signum, expected in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
        process = spawn(
            "coordinator",
            "start",
            "--node-id",
            "1",
            "--port",
            "0",
            "--log-dir",
            str(tmp_path / "log"),
            "--zookeeper",
            zk_connect,
            "--override",
            "offsets.topic.num.partitions=1",
            "--override",
            "coordinator.claim.grace.ms=0",
        )
        code, _, err = stop(process, signum, "serving on")
        assert code == expected, err
        assert "Traceback" not in err


def test_a_chroot_without_brokers_is_warned_about_once(capsys, zk, zk_connect, monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)
    chroot = zk_connect.partition("/")[2]
    assert cli.main(["topics", "list", "--zookeeper", zk_connect]) == 0
    err = capsys.readouterr().err
    assert err == f"warning: no /brokers under chroot /{chroot}: is the chroot right? Kafka's brokers register there\n"
    assert cli.main(["topics", "list", "--zookeeper", zk_connect + "-typo"]) == 0
    assert "no /brokers under chroot" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "brokers",
                "register",
                "--id",
                "1",
                "--host",
                "h",
                "--port",
                "9",
                "--persistent",
                "--zookeeper",
                zk_connect,
            ]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err  # brokers register creates the chroot: exempt
    assert cli.main(["topics", "list", "--zookeeper", zk_connect]) == 0
    assert capsys.readouterr().err == ""


def test_writes_that_precede_the_brokers_create_the_chroot_unwarned(capsys, zk, zk_connect, monkeypatch):
    """Kafka's bootstrap creates SCRAM users and ACLs in a fresh chroot before any broker registers."""
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)
    users = ["users", "--alter", "--entity-name", "alice", "--add-config", "SCRAM-SHA-256=[password=secret]"]
    assert cli.main([*users, "--zookeeper", zk_connect + "-users"]) == 0
    acls = ["acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]
    assert cli.main([*acls, "--zookeeper", zk_connect + "-acls"]) == 0
    assert "warning" not in capsys.readouterr().err
