"""``zkcoord migrate`` as an operator runs it, against real ZooKeeper and a coordinator node process."""

import json
import signal
import subprocess
import sys

import pytest
from migrate_support import one_node, state_of
from migrate_support import run_migrate as run

from zkcoord.cli import main
from zkcoord.migration.phases import Phase
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout
from zkcoord.zk.offsets import read_group_offsets, write_offsets


@pytest.fixture
def node(zk, zk_connect, tmp_path):
    with one_node(zk, zk_connect, tmp_path, {"t": 4}) as nodes:
        yield nodes


def test_status_plan_and_dry_run_change_nothing(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", p): 10 + p for p in range(4)})
    code, out, _ = run(capsys, zk_connect, "status", "--group", "g")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "PHASE", "EPOCH", "APPLIED", "UNDER-WAY", "NEXT", "LEGACY-JVM-MEMBERS",
                                "LEGACY-ZKCOORD-MEMBERS", "COORDINATOR-MEMBERS"]  # fmt: skip
    assert lines[1].split() == ["g", "ZK_ONLY", "0", "-", "-", "0001_dual_commit", "0", "0", "0"]
    code, out, _ = run(capsys, zk_connect, "plan", "--group", "g", "--to", "0002_backfill_log")
    assert code == 0 and out.splitlines() == [
        "group g: 0001_dual_commit up: Dual commit: members write the log, then ZooKeeper; everyone reads the "
        "larger of the two.",
        "group g: 0002_backfill_log up: Backfill the log from ZooKeeper: copy each ZooKeeper offset the log "
        "lacks or holds an older one of.",
    ]
    code, out, _ = run(capsys, zk_connect, "up", "--group", "g", "--dry-run")
    assert code == 0 and "would run 0001_dual_commit up" in out
    assert state_of(zk) is None  # a dry run writes nothing


def test_up_backfills_and_verify_reports_each_partition(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", p): 10 + p for p in range(4)})
    code, out, err = run(capsys, zk_connect, "up", "--group", "g", "--to", "0002_backfill_log")
    assert code == 0, err
    assert "backfilling 4 of 4 partition(s)" in out
    state = state_of(zk)
    assert (state.phase, state.epoch, state.applied) == (Phase.DUAL_WRITE, 1, ("0001_dual_commit", "0002_backfill_log"))
    code, out, _ = run(capsys, zk_connect, "verify", "--group", "g", "--json")
    assert code == 0
    [group] = json.loads(out)
    assert group["counts"] == {"match": 4, "zk_ahead": 0, "log_ahead": 0, "missing": 0}
    assert group["regressions"] == 0 and group["phase"] == "DUAL_WRITE"
    # Running it again is a no-op: idempotent.
    code, out, _ = run(capsys, zk_connect, "up", "--group", "g", "--to", "0002_backfill_log")
    assert code == 0 and "nothing to do" in out and state_of(zk).epoch == 1


def test_a_jvm_member_is_named_when_reading_from_the_log_is_refused(node, zk, zk_connect, capsys):
    """Issue: refuse an unsafe step with a reason that tells which member.

    The JVM member is the Python reference stand-in: its registration written as 0.8.2 writes it, without a
    zkcoord advertisement, which is all the refusal reads; a real connector would cost a JVM's start-up.
    """
    write_offsets(zk, "g", {("t", 0): 5})
    registration = layout.encode_consumer_registration(layout.ConsumerRegistration({"t": 1}, "static", 1))
    zk.create(layout.consumer_path("g", "g_jvm-host-1-abcd"), registration, ephemeral=True, makepath=True)
    assert run(capsys, zk_connect, "up", "--group", "g", "--to", "0002_backfill_log")[0] == 0
    code, _, err = run(capsys, zk_connect, "up", "--group", "g")
    assert code == 1
    assert "refusing to run 0003_read_from_log up" in err
    assert "g_jvm-host-1-abcd has no zkcoord advertisement" in err and "JVM" in err
    assert state_of(zk).phase == Phase.DUAL_WRITE  # nothing changed
    [status] = json.loads(run(capsys, zk_connect, "status", "--group", "g", "--json")[1])
    assert (status["legacy_jvm_members"], status["legacy_zkcoord_members"], status["legacy_members"]) == (1, 0, 1)


def test_verify_exits_non_zero_on_a_regression_and_names_the_partition(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", 0): 5, ("t", 1): 6})
    assert run(capsys, zk_connect, "up", "--group", "g")[0] == 0
    assert state_of(zk).phase == Phase.LOG_ONLY
    write_offsets(zk, "g", {("t", 1): 60})  # a stray ZooKeeper-only commit the log never saw
    code, out, _ = run(capsys, zk_connect, "verify", "--group", "g")
    assert code == 1
    assert "1 regression(s)" in out
    assert any(line.split()[:6] == ["g", "t", "1", "60", "6", "zk_ahead"] for line in out.splitlines())


def test_down_to_zero_leaves_zookeeper_complete(node, zk, zk_connect, capsys):
    write_offsets(zk, "g", {("t", 0): 5})
    assert run(capsys, zk_connect, "up", "--group", "g")[0] == 0
    node_commit = main(
        ["groups", "reset-offsets", "--group", "g", "--topic", "t:0", "--to-offset", "42", "--execute",
         "--zookeeper", zk_connect]
    )  # fmt: skip
    capsys.readouterr()
    assert node_commit == 0
    assert read_group_offsets(zk, "g").offsets[("t", 0)] == 42  # an explicit rewind writes both stores
    code, out, err = run(capsys, zk_connect, "down", "--group", "g", "--to", "zero")
    assert code == 0, err
    state = state_of(zk)
    assert (state.phase, state.applied, state.pending) == (Phase.ZK_ONLY, (), None)
    assert state.epoch == 6  # three phase changes up, three down
    assert run(capsys, zk_connect, "verify", "--group", "g")[0] == 0


def test_up_all_migrates_groups_side_by_side_and_a_refused_group_stops_only_itself(node, zk, zk_connect, capsys):
    """``--all`` runs several groups at once (Runner.run_all): each is migrated and verified as alone, in the
    order of its steps, and a group refused on the way (a JVM member at 0003) fails alone, with exit 1."""
    groups = [f"g{n:02d}" for n in range(12)]
    for n, group in enumerate(groups):
        write_offsets(zk, group, {("t", p): 100 * n + p for p in range(4)})
    registration = layout.encode_consumer_registration(layout.ConsumerRegistration({"t": 1}, "static", 1))
    zk.create(layout.consumer_path("g05", "g05_jvm-host-1-abcd"), registration, ephemeral=True, makepath=True)
    code, out, err = run(capsys, zk_connect, "up", "--all")
    assert code == 1
    assert err.count("Error: ") == 1 and "group g05: refusing to run 0003_read_from_log up" in err
    for group in groups:
        assert f"group {group}: backfilling 4 of 4 partition(s)" in out
        state = state_of(zk, group)
        assert state.phase == (Phase.DUAL_WRITE if group == "g05" else Phase.LOG_ONLY), group
        assert state.pending is None and state.epoch == (1 if group == "g05" else 3)
    code, out, _ = run(capsys, zk_connect, "verify", "--all", "--json")
    assert code == 0
    assert {g["group"]: g["counts"]["match"] for g in json.loads(out)} == dict.fromkeys(groups, 4)


def test_sigkill_of_up_all_with_groups_under_way_then_a_rerun_completes_every_group(node, zk, zk_connect, capsys):
    """Killed while several groups are mid-step, ``up --all`` run again finishes each step under way, once."""
    groups = [f"k{n:02d}" for n in range(24)]
    for group in groups:
        write_offsets(zk, group, {("t", p): 7 + p for p in range(4)})
    running = subprocess.Popen(
        [sys.executable, "-m", "zkcoord.cli", "migrate", "up", "--all", "--zookeeper", zk_connect],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        under_way = wait_until(
            lambda: (
                [g for g in groups if (state := state_of(zk, g)) is not None and state.pending is not None]
                or running.poll() is not None
            ),
            timeout=60,
            what="a group with a step under way",
        )
    finally:
        running.send_signal(signal.SIGKILL)
        running.wait(timeout=10)
    code, _, err = run(capsys, zk_connect, "up", "--all")
    assert code == 0, (under_way, err)
    for group in groups:
        state = state_of(zk, group)
        assert (state.phase, state.pending, state.epoch) == (Phase.LOG_ONLY, None, 3), (group, under_way)
    assert run(capsys, zk_connect, "verify", "--all")[0] == 0
    print(f"groups under way when killed: {under_way}")  # True: the run had ended before a step was seen under way


def test_bad_group_and_unknown_step_are_clear_errors(node, zk_connect, capsys):
    code, _, err = run(capsys, zk_connect, "up", "--group", "no/slash")
    assert code == 1 and "not a legal group id" in err
    code, _, err = run(capsys, zk_connect, "up", "--group", "g", "--to", "0009_nope")
    assert code == 1 and "unknown step '0009_nope'" in err


def test_foreign_data_in_the_state_znode_is_an_error_that_changes_nothing(node, zk, zk_connect, capsys):
    zk.create(layout.migration_path(layout.DEFAULT_ROOT, "g"), b"{not json", makepath=True)
    code, _, err = run(capsys, zk_connect, "up", "--group", "g")
    assert code == 1 and "not a migration state" in err
    assert zk.get(layout.migration_path(layout.DEFAULT_ROOT, "g"))[0] == b"{not json"


def test_verify_reports_foreign_data_in_the_state_znode(node, zk, zk_connect, capsys):
    """A node holds back the mirror of such a group (fails closed); verify must say why, not pass it."""
    zk.create(layout.migration_path(layout.DEFAULT_ROOT, "g"), b"\x00garbage", makepath=True)
    code, _, err = run(capsys, zk_connect, "verify", "--group", "g")
    assert code == 1 and "not a migration state" in err


def test_status_works_before_any_coordinator_node_exists(zk, zk_connect, capsys):
    """A pure ZooKeeper deployment can look before it starts migrating: members of the coordinator unknown."""
    write_offsets(zk, "g", {("t", 0): 5})
    code, out, _ = run(capsys, zk_connect, "status", "--group", "g")
    assert code == 0
    assert out.splitlines()[1].split() == ["g", "ZK_ONLY", "0", "-", "-", "0001_dual_commit", "0", "0", "-"]
