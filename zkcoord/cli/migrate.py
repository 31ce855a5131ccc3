"""``zkcoord migrate status|plan|up|down|verify|forget``: group offsets moved from ZooKeeper to the log, step by step.

Must not import another command family module; shared helpers come from ``zkcoord.cli.common``.
"""

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict

from tqdm import tqdm

from zkcoord.bridge.core import STRATEGIES
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
    zookeeper,
    zookeeper_option,
)
from zkcoord.cli.migrate_verify import migrate_verify


@contextlib.contextmanager
def _migration_runner(args: argparse.Namespace) -> Iterator:
    from zkcoord.channel import CoordinatorChannel
    from zkcoord.config import parse_bootstrap_servers
    from zkcoord.migration.kafka_target import KafkaTarget
    from zkcoord.migration.runner import ACK_TIMEOUT_S, Runner, load_steps
    from zkcoord.zk.nodes import discover_nodes

    steps = load_steps(args.migrations_dir, opt_in=True)
    security = client_security(args.command_config)
    with zookeeper(args) as client:
        fixed = parse_bootstrap_servers(args.bootstrap_server) if args.bootstrap_server else None
        channel = CoordinatorChannel(
            lambda: list(fixed) if fixed else discover_nodes(client, args.root),
            "zkcoord-migrate",
            args.timeout,
            create_connection=security.connector(),
        )
        progress = None if args.json else _count_progress
        bootstrap = getattr(args, "target_bootstrap_server", None)  # only up, down and verify have it
        target = None
        if bootstrap:  # the Kafka cluster has its own users: its own file, else the coordinators'
            target_config = getattr(args, "target_command_config", None)
            target_security = client_security(target_config) if target_config else security
            target = KafkaTarget(bootstrap, args.timeout, target_security.kafka_python_options())
        try:
            ack_ms = getattr(args, "ack_timeout", None)  # only up and down have the option
            ack_timeout_s = ACK_TIMEOUT_S if ack_ms is None else ack_ms / 1000
            yield Runner(
                client,
                channel,
                steps,
                root=args.root,
                say=_say(args),
                progress=progress,
                ack_timeout_s=ack_timeout_s,
                target=target,
                legacy_strategy=getattr(args, "partition_assignment_strategy", None) or "range",
            )
        finally:
            channel.close()
            if target is not None:
                target.close()


def _say(args: argparse.Namespace) -> Callable[[str], None]:
    return (lambda line: print(line, file=sys.stderr)) if args.json else print


def _count_progress(total: int, description: str) -> Callable[[int], None]:
    """A progress bar for long backfills (only on a terminal, only past a thousand partitions)."""
    bar = tqdm(total=total, unit="partition", desc=description, leave=False, disable=None if total > 1000 else True)

    def advance(count: int) -> None:
        bar.update(count)
        if bar.n >= total:
            bar.close()

    return advance


def cmd_migrate(args: argparse.Namespace) -> int:
    """``migrate status|plan|up|down|verify|forget``: 0 ok; 1 refused, failed, not confirmed or a regression found;
    2 a group found nowhere (``up``), more than one step without a terminal or --yes, no target given or the target
    Kafka cluster unreachable; 130 interrupted (Ctrl-C), with one line saying what it leaves."""
    from zkcoord.migration.kafka_target import TargetError
    from zkcoord.migration.phases import MigrationError
    from zkcoord.migration.runner import iter_groups

    if args.action == "forget" and args.all:
        raise UsageError("migrate forget takes one --group at a time")
    try:
        with _migration_runner(args) as runner:
            groups = list(iter_groups(runner, args.group, args.all))
            return args.migrate_func(runner, groups, args)
    except TargetError as error:  # the same for every group: stop at the first
        print(f"Error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except MigrationError as error:
        print(f"Error: {error}", file=sys.stderr)
        return EXIT_PROBLEM
    except KeyboardInterrupt:  # outside the steps (looking groups up, planning, forget, verify)
        print(f"\n{_interrupted_outside_steps(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _interrupted_outside_steps(args: argparse.Namespace) -> str:
    """Only reads happen outside the steps (up and down change state only in them, with Ctrl-C handled there)."""
    if args.action == "forget":
        return f"interrupted; `zkcoord migrate status --group {args.group}` shows whether the migration state is left"
    return "interrupted; nothing changed"


def _migrate_status(runner, groups: list[str], args: argparse.Namespace) -> int:
    rows = []
    for group in groups:
        status = runner.status(group)
        state = status.state
        rows.append(
            {
                "group": group,
                "phase": status.phase.name,
                "epoch": 0 if state is None else state.epoch,
                "applied": status.applied,
                "under_way": None if state is None or state.pending is None else "{} {}".format(*state.pending),
                "next": status.next_step,
                "legacy_members": status.legacy_members,
                "legacy_jvm_members": status.legacy_jvm_members,
                "legacy_zkcoord_members": status.legacy_zkcoord_members,
                "coordinator_members": status.coordinator_members,  # None: no coordinator answered
                "kafka_copy": None if state is None or state.kafka_copy is None else asdict(state.kafka_copy),
            }
        )
    if args.json:
        emit_json(rows)
        return EXIT_OK
    header = (
        "GROUP",
        "PHASE",
        "EPOCH",
        "APPLIED",
        "UNDER-WAY",
        "NEXT",
        "LEGACY-JVM-MEMBERS",
        "LEGACY-ZKCOORD-MEMBERS",
        "COORDINATOR-MEMBERS",
    )
    print_table(
        [
            (
                r["group"],
                r["phase"],
                r["epoch"],
                r["applied"][-1] if r["applied"] else "-",
                r["under_way"] or "-",
                r["next"] or "-",
                r["legacy_jvm_members"],
                r["legacy_zkcoord_members"],
                "-" if r["coordinator_members"] is None else r["coordinator_members"],
            )
            for r in rows
        ],
        header,
    )
    return EXIT_OK


def _migrate_plan(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.runner import DOWN, UP

    direction = DOWN if args.down else UP
    plans = {group: runner.plan(group, direction, args.to) for group in groups}
    if args.json:
        emit_json(
            {
                g: [{"step": p.step.name, "direction": p.direction, "resumed": p.resumed} for p in plan]
                for g, plan in plans.items()
            }
        )
        return EXIT_OK
    for group, plan in plans.items():
        if not plan:
            print(f"group {group}: nothing to do")
        for planned in plan:
            again = " (under way: runs again first)" if planned.resumed else ""
            print(
                f"group {group}: {planned.step.name} {planned.direction}{again}: "
                f"{planned.step.describe(planned.direction)}"
            )
    return EXIT_OK


def _migrate_forget(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.presence import forget, forget_refusals

    [group] = groups
    presence = _find_group(runner, group)
    if presence.state is None:
        print(f"group {group}: no migration state to forget")
        return EXIT_OK
    reasons = forget_refusals(presence)
    if reasons and not args.force:
        lines = "\n".join(f"  - {reason}" for reason in reasons)
        print(f"Error: group {group}: refusing to forget its migration state:\n{lines}", file=sys.stderr)
        print("(--force removes it anyway)", file=sys.stderr)
        return EXIT_PROBLEM
    forget(runner.zk, runner.root, group, presence.version)  # ConcurrentChangeError: exit 1, a check failed
    print(f"group {group}: migration state removed (it was {presence.state.phase.name}, epoch {presence.state.epoch})")
    return EXIT_OK


def _migrate_run(runner, groups: list[str], args: argparse.Namespace) -> int:
    from zkcoord.migration.kafka_target import TargetError
    from zkcoord.migration.phases import MigrationError
    from zkcoord.migration.runner import MigrationInterrupted

    asking = not (args.yes or args.dry_run)
    planned = groups if asking or args.group else []  # a plan checks --to before the group is looked for
    plans, failed = {}, 0
    for group in planned:
        try:
            plans[group] = runner.plan(group, args.action, args.to)
        except MigrationError as error:  # reported; the other groups go on, as in the run
            print(f"Error: {_of_group(group, error)}", file=sys.stderr)
            failed += 1
    groups = [group for group in groups if group in plans] if planned else groups
    if not groups:
        return EXIT_PROBLEM if failed else EXIT_OK
    if args.action == "up" and args.group and not args.allow_new_group:
        _refuse_unknown_group(runner, args.group)
    try:
        if asking and not _confirmed(plans, args):
            print("not confirmed: nothing changed", file=sys.stderr)
            return EXIT_PROBLEM
    except KeyboardInterrupt:  # at the question: nothing ran
        print("\ninterrupted; nothing changed", file=sys.stderr)
        return EXIT_INTERRUPTED
    interrupted = []
    with _stop_on_sigint(runner, args):
        runs = runner.run_all(groups, args.action, args.to, dry_run=args.dry_run, allow_rewind=args.allow_rewind)
        with contextlib.closing(runs):
            for group, outcome in tqdm(
                runs,
                total=len(groups),
                unit="group",
                desc=f"migrate {args.action}",
                leave=False,
                disable=None if len(groups) > 1 else True,
            ):
                if isinstance(outcome, TargetError):
                    runner.stop.set()  # the groups under way stop at their next safe point, as on Ctrl-C
                    raise outcome
                if isinstance(outcome, MigrationInterrupted):
                    interrupted.append(outcome)
                elif isinstance(outcome, MigrationError):  # refused, or a step that did not complete: others go on
                    print(f"Error: {_of_group(group, outcome)}", file=sys.stderr)
                    failed += 1
                elif not outcome.done:
                    runner.say(f"group {group}: nothing to do")
    if interrupted:
        print(_interrupted_line(interrupted, args), file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_PROBLEM if failed else EXIT_OK


def _of_group(group: str, error: Exception) -> str:
    """The error's message, naming the group it is about."""
    message = str(error)
    return message if message.startswith(f"group {group}") else f"group {group}: {message}"


def _refuse_unknown_group(runner, group: str) -> None:
    """A group with no member, offset or record anywhere is most likely a typo: refuse before writing anything."""
    from zkcoord.migration.presence import not_found_message

    presence = _find_group(runner, group)
    if not presence.exists:
        raise UsageError(not_found_message(group, presence))


def _find_group(runner, group: str):
    """What exists of the group, warning on stderr of offsets that are not offsets."""
    from zkcoord.migration.presence import find_group, unreadable_warning

    presence = find_group(runner.zk, runner.channel, runner.root, group)
    if (warning := unreadable_warning(presence)) is not None:
        print(f"WARN: {warning}", file=sys.stderr)
    return presence


def _confirmed(plans: dict, args: argparse.Namespace) -> bool:
    """A run that passes more than one step of some group asks first: on a terminal, else only with --yes."""
    long_runs = {group: plan for group, plan in plans.items() if len(plan) > 1}
    if not long_runs:
        return True
    shown = "; ".join(f"group {g}: {', '.join(p.step.name for p in plan)}" for g, plan in list(long_runs.items())[:3])
    more = f" and {len(long_runs) - 3} more group(s)" if len(long_runs) > 3 else ""
    if not sys.stdin.isatty():
        raise UsageError(
            f"migrate {args.action} would run more than one step ({shown}{more}); with no terminal to ask on, "
            "confirm with --yes (or go one step at a time with --to)"
        )
    shown_on = sys.stderr if args.json else sys.stdout  # --json keeps stdout for the JSON
    for group, plan in long_runs.items():
        for planned in plan:
            step, way = planned.step, planned.direction
            print(f"group {group}: {step.name} {way}: {step.describe(way)}", file=shown_on)
    print(f"migrate {args.action} will run these {sum(map(len, long_runs.values()))} step(s).", file=sys.stderr)
    sys.stderr.write("Proceed? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


@contextlib.contextmanager
def _stop_on_sigint(runner, args: argparse.Namespace) -> Iterator[None]:
    """While steps run, the first Ctrl-C asks every run to stop at its next safe point (between state writes, in
    waits); a second one leaves at once, as a kill would (every step is resumable from its recorded state)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may take signals
        yield
        return

    def on_sigint(signum, frame) -> None:
        if runner.stop.is_set():
            with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: a write it interrupted
                sys.stdout.flush()  # os._exit flushes nothing: keep what the steps printed
            print(_interrupted_line([], args), file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
        runner.stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted_line(interrupted: list, args: argparse.Namespace) -> str:
    """The one line an interrupted ``up``/``down`` prints: where each stopped group is, and how to resume."""
    from zkcoord.migration.runner import describe_state

    which = f"--group {args.group}" if args.group else "--all"
    to = f" --to {args.to}" if args.to else ""
    resume = f"run `zkcoord migrate {args.action} {which}{to}` with the same options to resume"
    if not interrupted:
        return f"interrupted; the state is what `zkcoord migrate status {which}` shows; {resume}"
    if len(interrupted) == 1 and args.group:
        return f"interrupted; the state is {describe_state(interrupted[0].state)}; {resume}"
    states = ", ".join(f"{stop.group}: {describe_state(stop.state)}" for stop in interrupted[:5])
    more = f" and {len(interrupted) - 5} more" if len(interrupted) > 5 else ""
    return f"interrupted; the state is {states}{more}; {resume}"


def register(commands) -> None:
    """Add ``migrate`` and its actions to the ``zkcoord`` subcommands."""
    migrate = commands.add_parser("migrate", help="move group offsets from ZooKeeper to the offsets log, step by step")
    actions = migrate.add_subparsers(dest="action", required=True)

    def action(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--group", help="one group")
        which.add_argument("--all", action="store_true", help="every ZooKeeper group and every migrating group")
        zookeeper_option(parser)
        parser.add_argument(
            "--bootstrap-server",
            metavar="HOST:PORT[,HOST:PORT]",
            help="coordinator nodes (default: discovered under --root in ZooKeeper)",
        )
        parser.add_argument("--root", default="/zkcoord", help="zkcoord's ZooKeeper root")
        parser.add_argument("--migrations-dir", metavar="DIR", help="steps to apply (default: the shipped ones)")
        parser.add_argument("--timeout", type=int, metavar="MS", default=30000, help="coordinator request timeout")
        parser.add_argument("--json", action="store_true", help="print JSON")
        command_config_option(parser)
        parser.set_defaults(func=cmd_migrate, migrate_func=handler)
        return parser

    def target_option(parser: argparse.ArgumentParser, help_text: str) -> None:
        parser.add_argument("--target-bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help=help_text)
        parser.add_argument(
            "--target-command-config",
            metavar="FILE",
            help="client properties for the Kafka cluster (default: --command-config's)",
        )

    action("status", "phase, applied steps and live members of groups", _migrate_status)
    plan = action("plan", "the steps up (or --down) would run", _migrate_plan)
    plan.add_argument("--down", action="store_true", help="plan going down instead of up")
    plan.add_argument("--to", metavar="STEP", help="stop at this step (zero: none applied)")
    for name, help_text in (
        ("up", "apply the next steps (all, or up to --to)"),
        ("down", "undo the last step (or down to --to STEP; zero undoes all)"),
    ):
        run = action(name, help_text, _migrate_run)
        run.add_argument("--to", metavar="STEP", help="the last step left applied (zero: none)")
        run.add_argument(
            "--yes", action="store_true", help="run more than one step without asking (needed without a terminal)"
        )
        if name == "up":
            run.add_argument(
                "--allow-new-group",
                action="store_true",
                help="migrate a group that has no member, committed offset or coordinator record yet",
            )
        run.add_argument("--dry-run", action="store_true", help="check and show the next step without running it")
        run.add_argument(
            "--allow-rewind",
            action="store_true",
            help="backfill may lower log offsets to ZooKeeper's; 0005 may lower the destination's offsets",
        )
        target_option(run, "the Kafka cluster step 0005_copy_to_kafka copies the group's offsets to (and back from)")
        run.add_argument(
            "--partition-assignment-strategy",
            "--partition_assignment_strategy",
            choices=STRATEGIES,
            help="the legacy members' 0.8.2 strategy, which the coordinator's members of a mixed group are assigned "
            "by (set by the step that enters DUAL_WRITE, up or down; default range)",
        )
        run.add_argument(
            "--ack-timeout",
            type=int,
            metavar="MS",
            help="how long a step waits for live zkcoord nodes and members to acknowledge a phase change (default "
            "30000; on timeout exit 1 naming those that did not, and the step stays under way)",
        )
    forget = action(
        "forget",
        "remove a group's migration state (refused while live members or log offsets depend on it)",
        _migrate_forget,
    )
    forget.add_argument("--force", action="store_true", help="remove it even so (members follow their own config)")
    verify = action(
        "verify", "compare ZooKeeper and log offsets per partition (exit 1 on a regression)", migrate_verify
    )
    verify.add_argument("--verbose", action="store_true", help="list matching partitions too")
    target_option(
        verify, "also compare the log with the group's offsets on this Kafka cluster (exit 1 where Kafka is behind)"
    )
