"""Ctrl-C in ``zkcoord migrate``: one line and exit 130 wherever it lands, and a second Ctrl-C during the steps
leaves at once without losing what was printed."""

import io
import os
import signal
import sys
import threading
from types import SimpleNamespace

import pytest

from zkcoord.cli import main
from zkcoord.cli.migrate import EXIT_INTERRUPTED, _migrate_run, _stop_on_sigint
from zkcoord.migration import presence, runner, verify
from zkcoord.migration.kafka_target import TargetError


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("action", "patched", "said"),
    [
        (["plan", "--group", "g"], (runner.Runner, "plan"), "interrupted; nothing changed"),
        (["up", "--group", "g"], (runner.Runner, "plan"), "interrupted; nothing changed"),
        (["up", "--group", "g", "--yes"], (presence, "find_group"), "interrupted; nothing changed"),  # after its plan
        (["verify", "--group", "g"], (verify, "verify_groups"), "interrupted; nothing changed"),
        (["forget", "--group", "g"], (presence, "find_group"), "`zkcoord migrate status --group g` shows whether"),
    ],
)
def test_ctrl_c_outside_the_steps_is_one_line_and_130(monkeypatch, capsys, action, patched, said):
    monkeypatch.setattr(runner.Runner, "plan", lambda self, group, direction, to: [])
    monkeypatch.setattr(*patched, interrupt)
    with monkeypatch.context() as no_zookeeper:  # nothing is read: every read is patched or interrupted
        no_zookeeper.setattr("zkcoord.cli.migrate.zookeeper", lambda args: _NoZooKeeper())
        code = main(["migrate", *action, "--zookeeper", "127.0.0.1:1", "--bootstrap-server", "127.0.0.1:1"])
    out, err = capsys.readouterr()
    assert code == EXIT_INTERRUPTED
    assert [line for line in err.splitlines() if line] == [line for line in err.splitlines() if said in line]
    assert said in err and "Traceback" not in err


class _NoZooKeeper:
    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return False


def test_a_second_ctrl_c_flushes_what_the_steps_printed_before_leaving(monkeypatch):
    flushed, exits = [], []

    class Stdout(io.StringIO):
        def flush(self):
            flushed.append(self.getvalue())

    monkeypatch.setattr(sys, "stdout", Stdout())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(os, "_exit", exits.append)
    run = SimpleNamespace(stop=threading.Event())
    print("group g: 0001_dual_commit up done")
    with _stop_on_sigint(run, SimpleNamespace(group="g", action="up", to=None)):
        signal.raise_signal(signal.SIGINT)
        assert run.stop.is_set() and exits == []
        signal.raise_signal(signal.SIGINT)
    assert exits == [EXIT_INTERRUPTED] and flushed[-1] == "group g: 0001_dual_commit up done\n"
    assert sys.stderr.getvalue().startswith("interrupted; the state is what `zkcoord migrate status --group g` shows")


def test_a_missing_target_stops_the_groups_under_way_too():
    class Runs:
        stop = threading.Event()

        def run_all(self, groups, *args, **kwargs):
            yield groups[0], TargetError("copying to Kafka needs the cluster")

    runs = Runs()
    args = SimpleNamespace(yes=True, dry_run=False, group=None, action="down", to=None, allow_rewind=False)
    with pytest.raises(TargetError):
        _migrate_run(runs, ["g", "h"], args)
    assert runs.stop.is_set()
