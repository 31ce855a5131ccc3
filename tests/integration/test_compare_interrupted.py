"""``zkcoord compare run`` stopped by Ctrl-C or SIGTERM, as an operator or a process manager would: one line on
stderr, exit 130 (0 for SIGTERM, a requested stop), no process of the run left, and the run marked interrupted in
its manifest and its traces (test_pipeline_report checks that the report flags such a run)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from zkcoord.cli.compare import _interrupted_line
from zkcoord.compare import runner
from zkcoord.compare.processes import RunFailed
from zkcoord.compare.runner import (
    CompareContext,
    CompareOptions,
    RunInterrupted,
    compare_run,
    read_manifest,
    stop_reason,
    write_manifest,
)
from zkcoord.errors import StopRequested
from zkcoord.interrupts import stop_on_interrupt
from zkcoord.testing.zookeeper import wait_until

pytestmark = pytest.mark.timeout(180)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_marks_the_run_interrupted_and_stops_every_process_it_started(tmp_path, signum):
    out = tmp_path / "compare"
    command = [
        *(sys.executable, "-m", "zkcoord.cli", "compare", "run", "--scenario", "rolling-bounce"),
        *("--variants", "eager", "--members", "2", "--partitions", "4", "--duration", "60"),
        *("--node-property", "group.initial.rebalance.delay.ms=0", "--out", str(out)),
    ]
    env = {key: value for key, value in os.environ.items() if key != "ZKCOORD_ZK_CONNECT"}  # its own ZooKeeper too
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    runner_trace = out / "traces" / "rolling-bounce" / "eager" / "runner.jsonl"
    try:
        wait_until(
            lambda: runner_trace.exists() and '"measure"' in runner_trace.read_text(), 90, what="the window to open"
        )
        started = descendants(process.pid)  # ZooKeeper, the node, two members
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == (130 if signum == signal.SIGINT else 0), stderr
    assert len(started) >= 4, started
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith(
        "interrupted; the state is: rolling-bounce / eager is marked interrupted in "
        f"{out}/compare.json and its traces, every process the run started is stopped; run zkcoord compare run "
        "--scenario rolling-bounce --variants eager"
    ), stderr
    wait_until(lambda: not any(alive(pid) for pid in started), 10, what="every process of the run to be gone")
    manifest = json.loads((out / "compare.json").read_text())
    assert [(run["variant"], run["status"], run["detail"]) for run in manifest["runs"]] == [
        ("eager", "interrupted", f"interrupted ({signum.name})")
    ]
    phases = [
        (event["phase"], event.get("reason"))
        for event in map(json.loads, runner_trace.read_text().splitlines())
        if event["type"] == "compare.phase"
    ]
    assert phases == [("warmup", None), ("measure", None), ("interrupted", f"interrupted ({signum.name})")]


def test_a_failed_run_is_marked_with_the_first_line_of_its_error():
    failure = RunFailed("member m01#1 exited (1):\nTraceback (most recent call last): ...")
    assert stop_reason(failure) == "RunFailed: member m01#1 exited (1):"
    assert stop_reason(KeyboardInterrupt()) == "interrupted (SIGINT)"
    assert stop_reason(StopRequested()) == "interrupted (SIGTERM)"
    assert stop_reason(TimeoutError()) == "TimeoutError"


class FinishedRun:
    """A run that finishes at once, without processes: what ``compare run`` does after a run ends."""

    def __init__(self, context, plan, variant):
        self.trace_dir = context.options.out / "traces"

    def run(self, say) -> None:
        pass


def test_ctrl_c_after_a_run_finished_leaves_it_finished(tmp_path, zk_connect, monkeypatch):
    def interrupted_figures(events):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "ScenarioRun", FinishedRun)
    monkeypatch.setattr(runner, "read_events", lambda trace_dir: [])
    monkeypatch.setattr(runner, "migration_figures", interrupted_figures)  # Ctrl-C once the run has finished
    options = CompareOptions(tmp_path, ["member-migration"], ["whole-group", "member-by-member"], zookeeper=zk_connect)
    with pytest.raises(RunInterrupted) as interrupted:
        compare_run(options, say=lambda line: None)
    assert interrupted.value.entry is None  # between runs: no run was stopped before its end
    runs = read_manifest(tmp_path)["runs"]
    assert (runs[0]["variant"], runs[0]["status"], runs[0]["detail"]) == ("whole-group", "ok", None)
    not_started = {"scenario": "member-migration", "variant": "member-by-member", "status": "not-started"}
    assert runs[1:] == interrupted.value.not_started == [{**not_started, "detail": None}]


def test_the_line_ctrl_c_leaves_names_every_run_left_and_how_to_make_exactly_those():
    def run(scenario: str, variant: str, status: str = "not-started") -> dict:
        return {"scenario": scenario, "variant": variant, "status": status, "detail": None}

    not_started = [run("rolling-bounce", "static"), run("kill", "legacy"), run("kill", "eager"), run("kill", "static")]
    line = _interrupted_line(run("rolling-bounce", "eager", "interrupted"), not_started, "out")
    assert line == (
        "interrupted; the state is: rolling-bounce / eager is marked interrupted in out/compare.json and its "
        "traces, not started: rolling-bounce / static, kill / legacy, kill / eager, kill / static, every process "
        "the run started is stopped; run zkcoord compare run --scenario rolling-bounce --variants eager,static ... "
        "--out out and zkcoord compare run --scenario kill --variants legacy,eager,static ... --out out to resume"
    )
    assert _interrupted_line(None, [], "out").endswith("; no run is left to do")


def test_a_run_not_started_keeps_what_an_earlier_command_wrote_of_it(tmp_path):
    options = CompareOptions(tmp_path, ["kill"])
    earlier = {"scenario": "kill", "variant": "legacy", "status": "ok", "detail": None}
    write_manifest(options, [earlier])
    not_started = {**earlier, "status": "not-started"}
    write_manifest(options, [not_started, {**not_started, "variant": "eager"}])
    assert [(run["variant"], run["status"]) for run in read_manifest(tmp_path)["runs"]] == [
        ("legacy", "ok"),
        ("eager", "not-started"),
    ]


def test_ctrl_c_while_the_manifest_is_written_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    options = CompareOptions(tmp_path, ["kill"])
    finished = {"scenario": "kill", "variant": "legacy", "status": "ok", "detail": None}
    write_manifest(options, [finished])
    write_text = Path.write_text

    def torn(path, text, *args, **kwargs):
        write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        write_manifest(options, [finished, {**finished, "variant": "eager"}])
    monkeypatch.undo()
    assert [(run["variant"], run["status"]) for run in read_manifest(tmp_path)["runs"]] == [("legacy", "ok")]


@pytest.fixture
def handlers_restored():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_sigterm_while_the_brokers_stop_still_stops_zookeeper_then_stops_the_command(tmp_path, handlers_restored):
    stop_on_interrupt()
    context = CompareContext(CompareOptions(tmp_path / "out", ["kill"]))
    stopped = []
    context._resources.callback(stopped.append, "zookeeper")  # closed last: the stack unwinds in reverse
    context._resources.callback(lambda: (os.kill(os.getpid(), signal.SIGTERM), stopped.append("broker")))
    with pytest.raises(StopRequested):
        context.__exit__(None, None, None)
    assert stopped == ["broker", "zookeeper"] and not context.scratch.exists()


def test_sigterm_in_the_demos_comparison_stops_every_process_it_started_and_exits_0(tmp_path):
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "zkcoord.cli", "demo", "--members", "2", "--partitions", "4"]
    command += ["--variants", "static", "--out", str(out)]
    runner_trace = out / "compare" / "traces" / "rolling-bounce" / "static" / "runner.jsonl"
    with open(tmp_path / "stderr", "w+") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        try:
            wait_until(
                lambda: runner_trace.exists() and '"measure"' in runner_trace.read_text(), 120, what="the window"
            )
            started = descendants(process.pid)  # ZooKeeper, the broker, the node, two members
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=90)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        said = stderr.read()
    assert process.returncode == 0 and "Traceback" not in said, said
    assert len(started) >= 5, started
    wait_until(lambda: not any(alive(pid) for pid in started), 10, what="every process of the demo to be gone")
