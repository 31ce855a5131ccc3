"""``zkcoord lag``: every consumer group's lag against the brokers' log ends, with Burrow's statuses
(docs/lag.md); ``--watch`` re-evaluates on an interval, ``lag serve`` answers over HTTP (JSON and Prometheus).

Exit codes: 0 every group OK, 1 a group WARN, ERR or NOTFOUND, 2 usage or an unreachable ZooKeeper, coordinator
or broker, 130 interrupted. Must not import another command family module.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kazoo.exceptions import KazooException

from zkcoord.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_USAGE,
    UsageError,
    client_security,
    command_config_option,
    emit_json,
    print_table,
    zk_connect,
)
from zkcoord.clock import SystemClock
from zkcoord.errors import ZkcoordError
from zkcoord.files import replace_text
from zkcoord.lag import GroupLag, GroupStatus, LagWindows, WindowConfig, report

CLOCK = SystemClock()  # the time every observation is taken at; tests put a manual clock here
ONE_OBSERVATION_NOTE = (
    "note: one observation shows no trend, so no partition is STALL or WARN yet (a STOP needs time to pass too); "
    "run with --watch, or with --state-file from a timer, to evaluate a window"
)


class BrokersUnreachable(ZkcoordError):
    """No broker registered in ZooKeeper answered: the lag cannot be known."""


class Evaluation:
    """The admin client, the windows and the groups to watch: one :meth:`run` observes and evaluates them all."""

    def __init__(self, args: argparse.Namespace):
        from zkcoord.admin import AdminClient

        self.groups = sorted(set(args.group or ()))
        self.connect = zk_connect(args.zookeeper)
        self.windows = LagWindows(_window_config(args))
        self.client = AdminClient(
            bootstrap_servers=args.coordinator_server,
            zookeeper_connect=self.connect,
            root=args.root,
            request_timeout_ms=args.timeout,
            security=client_security(args.command_config),
            warn=self._warn,
        )

    def close(self) -> None:
        self.client.close()

    def _warn(self, message: str) -> None:
        """The admin client's warnings (an unreadable migration state ...) on stderr; not a broker problem, which
        :meth:`run` raises as this command's error."""
        if self.client.broker_offsets is None or self.client.broker_offsets.problem is None:
            print(f"WARN: {message}", file=sys.stderr)

    def run(self) -> list[GroupLag]:
        """One observation of every group (or the ``--group`` ones) and their evaluation at the clock's time."""
        from zkcoord.admin.lag_observer import check_coordinator_groups, every_group, observe_groups

        self.client.broker_offsets.retry()  # a broker that failed an evaluation is asked again in the next
        group_ids = self.groups or every_group(self.client)
        observed = observe_groups(self.client, group_ids)
        if (problem := self.client.broker_offsets.problem) is not None:
            raise BrokersUnreachable(f"{problem} (ZooKeeper {self.connect})")
        now_ms = CLOCK.now_ms()
        remembered = self.windows.coordinator_groups(now_ms)
        found = {group_id for group_id, observation in observed.items() if observation is not None}
        check_coordinator_groups(self.client, (remembered & set(self.groups) if self.groups else remembered) - found)
        if not self.groups:
            self.windows.retain(group_ids)  # every group was listed: the others are gone
        for group_id, observation in observed.items():
            if observation is None:
                self.windows.observe(group_id, None, now_ms)
            else:
                self.windows.observe(group_id, observation.partitions, now_ms, observation.on_coordinator)
        return [
            replace(self.windows.evaluate(group_id, now_ms), members=observation.members)
            if (observation := observed[group_id]) is not None
            else self.windows.evaluate(group_id, now_ms)
            for group_id in group_ids
        ]


def cmd_lag(args: argparse.Namespace) -> int:
    """Evaluate once, or every ``--watch`` seconds; the exit code of the last evaluation."""
    if args.iterations is not None and (args.iterations < 1 or args.watch is None):
        raise UsageError("--iterations takes a number of at least 1, with --watch")

    def evaluate(evaluation: Evaluation) -> int:
        if args.state_file:
            evaluation.windows = _load_state(args.state_file, evaluation.windows.config)
        return _evaluate_repeatedly(evaluation, args)

    return _guarded(args, evaluate)


def _guarded(args: argparse.Namespace, work: Callable[[Evaluation], int]) -> int:
    """``work(evaluation)``'s exit code; 2 with one line when a service cannot be reached, 130 on Ctrl-C."""
    try:
        evaluation = Evaluation(args)
        try:
            return work(evaluation)
        finally:
            evaluation.close()
    except KeyboardInterrupt:
        print("interrupted; nothing was changed (zkcoord lag only reads)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ZkcoordError, KazooException, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _evaluate_repeatedly(evaluation: Evaluation, args: argparse.Namespace) -> int:
    iterations = args.iterations if args.watch is not None else 1
    done = 0
    while True:
        lags = evaluation.run()
        done += 1
        if args.state_file:
            _save_state(args.state_file, evaluation.windows)
        _print(lags, args)
        if args.watch is None and not args.state_file:
            print(ONE_OBSERVATION_NOTE, file=sys.stderr)
        if iterations is not None and done >= iterations:
            return exit_code(lags)
        time.sleep(args.watch or 0)


def exit_code(lags: list[GroupLag]) -> int:
    """0 when every group is OK, 1 when one is WARN, ERR or NOTFOUND (but for one that has committed nothing yet:
    a group under /consumers whose consumers never committed has no lag to tell)."""
    return EXIT_OK if all(lag.status == GroupStatus.OK or lag.uncommitted for lag in lags) else EXIT_PROBLEM


def _print(lags: list[GroupLag], args: argparse.Namespace) -> None:
    if args.json:
        emit_json([report.group_json(args.cluster, lag) for lag in lags])
        return
    rows = [row for lag in lags for row in report.table_rows(lag)]
    if rows:
        print_table(rows, report.TABLE_HEADER)
        print()
    for lag in lags:
        print(report.status_line(lag))
    if not lags:
        print("no consumer group found")
    sys.stdout.flush()


def _window_config(args: argparse.Namespace) -> WindowConfig:
    try:
        return WindowConfig(
            intervals=args.intervals,
            min_distance_ms=int(args.min_distance * 1000),
            expire_group_ms=int(args.expire_group * 1000),
            allowed_lag=args.allowed_lag,
            commit_interval_ms=args.commit_interval_ms,
        )
    except ValueError:
        raise UsageError(
            "--intervals and --expire-group must be positive, "
            "--min-distance, --allowed-lag and --commit-interval-ms not negative"
        ) from None


def _load_state(path: str, config: WindowConfig) -> LagWindows:
    """The windows an earlier run saved in ``path``; empty ones when it does not exist yet."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return LagWindows(config)
    try:
        return LagWindows.from_json(json.loads(text), config)
    except ValueError as error:
        raise UsageError(f"--state-file {path}: {error}") from None


def _save_state(path: str, windows: LagWindows) -> None:
    """Replace the state file whole, so a run cut short leaves the last whole state."""
    replace_text(Path(path), json.dumps(windows.to_json(), sort_keys=True))


def cmd_lag_serve(args: argparse.Namespace) -> int:
    """Serve the latest evaluation over HTTP, re-evaluating every ``--interval`` seconds, until Ctrl-C or SIGTERM."""
    from zkcoord.cli.lag_serve import serve

    def first_then_serve(evaluation: Evaluation) -> int:
        first = evaluation.run()  # before serving: a wrong option or an unreachable cluster is said at once
        return serve(evaluation, first, args)

    return _guarded(args, first_then_serve)


def _positive_seconds(text: str) -> float:
    """An interval to sleep between evaluations: 0 would poll in a tight loop, a negative one cannot be slept."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return seconds


def _options(parser: argparse.ArgumentParser, top: bool) -> None:
    """The options of ``lag`` and ``lag serve``, before or after ``serve``."""

    def default(value):
        return value if top else argparse.SUPPRESS  # the subcommand's copy must not hide a value given before it

    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/chroot]", default=default(None), help="default: $ZKCOORD_ZK_CONNECT"
    )
    parser.add_argument(
        "--coordinator-server",
        metavar="HOST:PORT[,HOST:PORT]",
        default=default(None),
        help="zkcoord's coordinator nodes (default: discovered under --root in ZooKeeper)",
    )
    parser.add_argument("--root", default=default("/zkcoord"), help="zkcoord's ZooKeeper root")
    parser.add_argument("--group", action="append", default=default(None), help="a group (repeatable; default all)")
    parser.add_argument("--timeout", type=int, metavar="MS", default=default(30000), help="request timeout")
    parser.add_argument("--cluster", default=default("local"), help="the cluster name in JSON and HTTP paths")
    parser.add_argument(
        "--intervals", type=int, metavar="N", default=default(10), help="commits kept per partition (10)"
    )
    parser.add_argument(
        "--min-distance", type=float, metavar="S", default=default(0.0), help="merge commits closer than this (0)"
    )
    parser.add_argument(
        "--expire-group",
        type=float,
        metavar="S",
        default=default(604800.0),
        help="forget a group whose newest commit is older (7 days)",
    )
    parser.add_argument(
        "--allowed-lag", type=int, metavar="N", default=default(0), help="lag up to this counts as none (0)"
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=int,
        metavar="MS",
        default=default(60000),
        help="a live member whose offset did not move counts as committing this often (60000: 0.8.2's default)",
    )
    command_config_option(parser, default(None))


def register(commands) -> None:
    """Add ``lag`` and ``lag serve`` to the ``zkcoord`` subcommands."""
    lag = commands.add_parser("lag", help="consumer lag with Burrow's statuses, for legacy, coordinator, mixed groups")
    _options(lag, top=True)
    lag.add_argument("--json", action="store_true", help="print JSON (Burrow's group status, per group)")
    lag.add_argument(
        "--watch",
        nargs="?",
        type=_positive_seconds,
        const=30.0,
        metavar="SECONDS",
        help="re-evaluate every SECONDS (30)",
    )
    lag.add_argument("--iterations", type=int, metavar="N", help="with --watch: stop after N evaluations")
    lag.add_argument(
        "--state-file", metavar="PATH", help="keep the windows in PATH between runs (a check run from a timer)"
    )
    lag.set_defaults(func=cmd_lag)
    actions = lag.add_subparsers(dest="lag_action")
    serve = actions.add_parser("serve", help="serve /v3/kafka/<cluster>/consumer/<group>/status and /metrics")
    _options(serve, top=False)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument(
        "--interval", type=_positive_seconds, metavar="S", default=30.0, help="re-evaluate every S seconds (30)"
    )
    serve.set_defaults(func=cmd_lag_serve)
