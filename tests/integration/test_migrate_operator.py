"""``zkcoord migrate`` never misleads the operator: a typo is refused, state can be forgotten, several steps are
confirmed, each direction says what it did, an expected difference reads as expected, and Ctrl-C stops cleanly."""

import os
import pty
import signal
import subprocess
import sys

import pytest
from migrate_support import one_node, state_of
from migrate_support import run_migrate as run
from test_admin import commit

from zkcoord.cli import main
from zkcoord.migration import store
from zkcoord.migration.phases import MigrationState, Phase
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout
from zkcoord.zk.offsets import write_offsets

DUAL_COMMIT = "0001_dual_commit"


@pytest.fixture
def node(zk, zk_connect, tmp_path):
    with one_node(zk, zk_connect, tmp_path, {"t": 4}) as nodes:
        yield nodes


def migrate(capsys, zk_connect: str, *args: str) -> tuple[int, str, str]:
    """``zkcoord migrate ARGS`` in process as typed, without the tests' ``--yes``."""
    code = main(["migrate", *args, "--zookeeper", zk_connect])
    out, err = capsys.readouterr()
    return code, out, err


def migrate_process(zk_connect: str, *args: str, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "zkcoord.cli", "migrate", *args, "--zookeeper", zk_connect]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def test_a_typo_is_refused_and_leaves_no_state_and_forget_removes_a_new_groups_state(node, zk, zk_connect, capsys):
    write_offsets(zk, "orders", {("t", 0): 5})
    code, out, err = migrate(capsys, zk_connect, "up", "--group", "ordrs", "--to", DUAL_COMMIT)
    assert code == 2 and out == ""
    assert "group 'ordrs' was not found" in err and "legacy members" in err and "committed log offsets" in err
    assert "`zkcoord groups list`" in err and "--allow-new-group" in err
    assert zk.exists(layout.migration_path(layout.DEFAULT_ROOT, "ordrs")) is None

    code, out, err = migrate(capsys, zk_connect, "up", "--group", "fresh", "--to", DUAL_COMMIT, "--allow-new-group")
    assert code == 0, err
    assert state_of(zk, "fresh").phase == Phase.DUAL_WRITE
    code, out, err = migrate(capsys, zk_connect, "forget", "--group", "fresh")
    assert (code, err) == (0, "") and "group fresh: migration state removed (it was DUAL_WRITE, epoch 1)" in out
    assert state_of(zk, "fresh") is None
    assert zk.exists(layout.bridge_path(layout.DEFAULT_ROOT, "fresh")) is None  # the bridge went with it
    code, out, _ = migrate(capsys, zk_connect, "forget", "--group", "fresh")
    assert code == 0 and "no migration state to forget" in out


def test_forget_is_refused_while_readers_depend_on_the_log_unless_forced(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", p): 10 + p for p in range(4)})
    assert run(capsys, zk_connect, "up", "--group", "g")[0] == 0
    code, _, err = migrate(capsys, zk_connect, "forget", "--group", "g")
    assert code == 1
    assert "refusing to forget its migration state" in err and "at LOG_ONLY with 8 committed offset(s)" in err
    assert "--force" in err and state_of(zk, "g").phase == Phase.LOG_ONLY
    code, out, _ = migrate(capsys, zk_connect, "forget", "--group", "g", "--force")
    assert code == 0 and "migration state removed (it was LOG_ONLY, epoch 3)" in out and state_of(zk, "g") is None


def test_several_steps_need_a_confirmation_one_step_does_not(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", 0): 5})
    code, out, err = migrate(capsys, zk_connect, "up", "--group", "g")
    assert code == 2 and "would run more than one step" in err and "--yes" in err
    assert state_of(zk, "g") is None

    running = migrate_process(zk_connect, "up", "--group", "g", stdin=(terminal := pty.openpty())[1])
    try:
        os.close(terminal[1])
        os.write(terminal[0], b"n\n")
        out, err = running.communicate(timeout=60)
    finally:
        running.kill()
        os.close(terminal[0])
    assert running.returncode == 1, err
    assert "Proceed? [y/N]" in err and "not confirmed: nothing changed" in err
    assert f"group g: {DUAL_COMMIT} up: Dual commit" in out and state_of(zk, "g") is None

    code, out, err = migrate(capsys, zk_connect, "up", "--group", "g", "--to", DUAL_COMMIT)
    assert code == 0 and "Proceed" not in err and state_of(zk, "g").phase == Phase.DUAL_WRITE


def test_a_group_that_cannot_be_planned_is_reported_and_the_others_still_run(node, zk, zk_connect, capsys):
    write_offsets(zk, "good", {("t", 0): 5})
    write_offsets(zk, "odd", {("t", 0): 5})
    unknown_step = MigrationState(Phase.ZK_ONLY, 1, ("0000_removed_step",))
    store.write_state(zk, layout.DEFAULT_ROOT, "odd", unknown_step, store.NO_VERSION)
    code, _, err = migrate(capsys, zk_connect, "up", "--all", "--to", DUAL_COMMIT)
    assert code == 1
    assert "Error: group odd: recorded steps 0000_removed_step are not in the migrations directory" in err
    assert state_of(zk, "good").phase == Phase.DUAL_WRITE and state_of(zk, "odd") == unknown_step


def test_each_direction_says_what_it_did(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", 0): 5})
    code, out, _ = run(capsys, zk_connect, "up", "--group", "g", "--to", "0002_backfill_log")
    assert code == 0 and "0002_backfill_log up done (Backfill the log from ZooKeeper" in out
    code, out, _ = migrate(capsys, zk_connect, "plan", "--group", "g", "--down", "--to", "zero")
    assert out.splitlines()[0].startswith("group g: 0002_backfill_log down: Backfill kept: nothing to undo")
    code, out, err = migrate(capsys, zk_connect, "down", "--group", "g")
    assert code == 0, err
    assert "group g: 0002_backfill_log down done (Backfill kept: nothing to undo" in out
    assert "Backfill the log from ZooKeeper" not in out
    code, out, _ = migrate(capsys, zk_connect, "down", "--group", "g")
    assert code == 0 and f"{DUAL_COMMIT} down done (Back to ZooKeeper only:" in out


def test_verify_in_log_only_reads_a_frozen_zookeeper_as_expected(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", p): 10 for p in range(4)})
    assert run(capsys, zk_connect, "up", "--group", "g")[0] == 0
    commit(node.nodes[1].address, "g", {("t", p): 20 for p in range(4)})  # the log moves on; ZooKeeper stays
    code, out, _ = migrate(capsys, zk_connect, "verify", "--group", "g")
    assert code == 0
    assert "group g (phase LOG_ONLY; readers use the log): 4 partition(s), 0 regression(s)" in out
    assert "ZooKeeper frozen since LOG_ONLY: 4 partition(s) behind the log by 40 offset(s) (expected)" in out
    assert "log_ahead" not in out and "LAG" not in out  # no table of expected rows
    code, out, _ = migrate(capsys, zk_connect, "verify", "--group", "g", "--verbose")
    header, *rows = [line.split() for line in out.splitlines() if line.startswith(("GROUP", "g "))]
    assert header[-1] == "ZOOKEEPER-BEHIND" and [row[-1] for row in rows] == ["10"] * 4


def test_ctrl_c_during_up_prints_one_line_exits_130_and_a_rerun_resumes(node, zk, zk_connect, capsys):
    """The run is held in 0001's wait for acknowledgements by a zkcoord legacy member that never acknowledges
    (its advertisement written as that member writes it): a deterministic point in the middle of a step."""
    write_offsets(zk, "g", {("t", 0): 5})
    member = "g_stuck-host-1-abcd"
    registration = layout.encode_consumer_registration(layout.ConsumerRegistration({"t": 1}, "static", 1))
    zk.create(layout.consumer_path("g", member), registration, ephemeral=True, makepath=True)
    advert = layout.encode_legacy_advert("", -1, "zookeeper", False)
    zk.create(layout.legacy_advert_path(layout.DEFAULT_ROOT, "g", member), advert, ephemeral=True, makepath=True)
    running = migrate_process(zk_connect, "up", "--group", "g", "--yes", "--ack-timeout", "60000")
    try:
        wait_until(
            lambda: (state := state_of(zk, "g")) is not None and state.pending == (DUAL_COMMIT, "up"),
            timeout=30,
            what="0001 under way",
        )
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=20)
    finally:
        running.kill()
    assert running.returncode == 130, err
    assert err.splitlines() == [
        f"interrupted; the state is DUAL_WRITE (epoch 1), {DUAL_COMMIT} under way (up); "
        "run `zkcoord migrate up --group g` with the same options to resume"
    ]
    state = state_of(zk, "g")
    assert (state.phase, state.epoch, state.applied, state.pending) == (Phase.DUAL_WRITE, 1, (), (DUAL_COMMIT, "up"))

    zk.delete(layout.legacy_advert_path(layout.DEFAULT_ROOT, "g", member))
    zk.delete(layout.consumer_path("g", member))
    code, out, err = migrate(capsys, zk_connect, "up", "--group", "g", "--to", DUAL_COMMIT)
    assert code == 0, err
    state = state_of(zk, "g")
    assert (state.phase, state.epoch, state.applied, state.pending) == (Phase.DUAL_WRITE, 1, (DUAL_COMMIT,), None)
