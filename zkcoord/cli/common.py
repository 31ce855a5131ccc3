"""What every ``zkcoord`` command family shares: exit codes, ``--zookeeper`` and the client it opens,
``--command-config`` and the security it gives, table and JSON output, Ctrl-C/SIGTERM handling, and the parsing
of comma lists and Kafka-style properties.

Must not import a command family module (``zkcoord.cli.*``): they import this one.
"""

import argparse
import contextlib
import json
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from zkcoord import env
from zkcoord.errors import ConfigError, StopRequested, ZkcoordError
from zkcoord.security.client import ClientSecurity
from zkcoord.tables import format_table
from zkcoord.zk import layout
from zkcoord.zk.acl import start_logged_in
from zkcoord.zk.client import tool_client
from zkcoord.zk.credentials import zookeeper_security

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
CONNECT_TIMEOUT_S = 10.0
NO_ZOOKEEPER = "no ZooKeeper given: pass --zookeeper HOST:PORT[/chroot] or set ZKCOORD_ZK_CONNECT"


class UsageError(ZkcoordError):
    """Bad arguments or an unreachable service: exit code 2."""


def zk_connect(given: str | None) -> str:
    """``given`` (an option or a properties file's), else ``$ZKCOORD_ZK_CONNECT``; a UsageError when neither is."""
    connect = given or env.zookeeper_connect()
    if not connect:
        raise UsageError(NO_ZOOKEEPER)
    return connect


def zookeeper_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--zookeeper`` (read by :func:`zookeeper`) to ``parser``."""
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/chroot]", help="ZooKeeper connect string (default: $ZKCOORD_ZK_CONNECT)"
    )


def zookeeper(args: argparse.Namespace, create_chroot: bool = False) -> contextlib.AbstractContextManager[KazooClient]:
    """A started kazoo client on ``--zookeeper``; the chroot is created first when asked."""
    return zookeeper_at(zk_connect(args.zookeeper), create_chroot)


@contextlib.contextmanager
def zookeeper_at(connect: str, create_chroot: bool = False) -> Iterator[KazooClient]:
    """A started kazoo client on ``connect`` (``host:port[,..][/chroot]``); the chroot is created first when asked.

    Credentials come as Kafka's tools take them (``-Djava.security.auth.login.config`` in ``$KAFKA_OPTS``), and
    as with them the znodes it creates get Kafka's ACLs whenever it logs in (:mod:`zkcoord.zk.acl`).
    """
    hosts, _, chroot = connect.partition("/")
    security = zookeeper_security()
    client = tool_client(hosts, security=security)
    try:
        start_logged_in(client, security, CONNECT_TIMEOUT_S)
    except KazooTimeoutError:
        client.stop()
        raise UsageError(f"cannot connect to ZooKeeper at {hosts} within {CONNECT_TIMEOUT_S:g} s") from None
    try:
        if chroot:
            if create_chroot:
                client.ensure_path("/" + chroot)
            client.chroot = "/" + chroot.rstrip("/")
            if not create_chroot:
                warn_without_brokers(client)
        yield client
    finally:
        client.stop()
        client.close()


def warn_without_brokers(client: KazooClient) -> None:
    """Warn on stderr when the chroot of ``client`` has no ``/brokers``: a mistyped chroot reads as an empty cluster,
    and every listing would look fine and empty."""
    if client.exists(layout.BROKERS_PATH) is None:
        print(
            f"warning: no {layout.BROKERS_PATH} under chroot {client.chroot}: is the chroot right? Kafka's brokers "
            "register there",
            file=sys.stderr,
            flush=True,
        )


def command_config_option(parser: argparse.ArgumentParser, default: object = None) -> None:
    """Add ``--command-config FILE`` (Kafka's tools' name; read by :func:`command_config` and
    :func:`client_security`) to ``parser``."""
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        default=default,
        help="client properties for coordinator nodes: security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password (or sasl.jaas.config), ssl.ca.location, ssl.certificate.location, ssl.key.location...",
    )


def command_config(path: str | None) -> dict[str, str]:
    """The properties of a ``--command-config`` file (none without one); a UsageError when it cannot be read."""
    if not path:
        return {}
    try:
        return read_properties(path)
    except OSError as error:
        raise UsageError(f"--command-config {path}: {error.strerror or error}") from None


def client_security(path: str | None) -> ClientSecurity:
    """How to reach coordinator nodes, from a ``--command-config`` file; plaintext without one. A bad value is a
    UsageError naming the file."""
    try:
        return ClientSecurity.from_properties(command_config(path))
    except ConfigError as error:
        raise UsageError(f"--command-config {path}: {error}") from None


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    """``rows`` under ``header`` as Kafka's tools print tables."""
    print(format_table(header, rows))


def emit_json(value: object) -> None:
    """``value`` as indented JSON with sorted keys (what ``--json`` prints)."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


class _Interruption:
    """Whether Ctrl-C stopped the command, and what the command said Ctrl-C would leave (one command per process)."""

    interrupted = False
    hint: tuple[str, str] | None = None


def set_resume_hint(state: str, resume: str) -> None:
    """Say what Ctrl-C leaves from now on: ``zkcoord`` then prints ``interrupted; the state is STATE; run RESUME to
    resume`` (e.g. ``set_resume_hint("step 0002 under way for group orders", "zkcoord migrate up --group orders")``).
    A later call replaces it."""
    _Interruption.hint = (state, resume)


def mark_interrupted() -> None:
    """Record that Ctrl-C stopped the command, for a command that handles SIGINT itself and then returns: ``zkcoord``
    still says ``interrupted`` and exits 130."""
    _Interruption.interrupted = True


def interruption_message() -> str | None:
    """The line ``zkcoord`` prints when Ctrl-C stopped the command (None if it did not): ``interrupted``, plus the
    resume hint the command set."""
    if not _Interruption.interrupted:
        return None
    if _Interruption.hint is None:
        return "interrupted"
    state, resume = _Interruption.hint
    return f"interrupted; the state is {state}; run {resume} to resume"


def reset_interruption() -> None:
    """Forget a previous command's interruption and hint (``main`` runs one command per call)."""
    _Interruption.interrupted = False
    _Interruption.hint = None


def interrupt_event() -> threading.Event:
    """An event set by Ctrl-C or SIGTERM; install it before starting what they should stop. Ctrl-C also marks the
    command interrupted (exit 130); SIGTERM is a requested stop (the command's own exit code)."""
    stop = threading.Event()

    def on_interrupt(*_) -> None:
        mark_interrupted()
        stop.set()

    signal.signal(signal.SIGINT, on_interrupt)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def stop_on_sigterm() -> None:
    """SIGTERM raises StopRequested until :func:`interrupt_event` takes over: for a start-up that no event can cut
    short, which then unwinds with its cleanup as at Ctrl-C, and the command exits 0."""

    def on_sigterm(*_) -> None:
        raise StopRequested

    signal.signal(signal.SIGTERM, on_sigterm)


def wait_until_set(stop: threading.Event) -> None:
    """Block until ``stop`` is set, waking now and then so that signal handlers run."""
    while not stop.wait(0.5):
        pass


def comma_list(text: str) -> list[str]:
    """``a, b,,c`` as ``["a", "b", "c"]``: the items of a comma-separated option, stripped, empty ones left out."""
    return [item for item in (part.strip() for part in text.split(",")) if item]


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: ``key=value``, ``key: value`` or ``key value`` lines; ``#``/``!`` comments."""
    properties = {}
    for line in _logical_lines(Path(path).read_text(encoding="utf-8")):
        key, *value = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
        properties[key] = value[0] if value else ""
    return properties


def _logical_lines(text: str) -> Iterator[str]:
    """Java's logical lines: one that ends in an odd number of backslashes goes on with the next line's text
    (how JAAS values are usually written)."""
    logical = None
    for raw in text.splitlines():
        line = raw.strip()
        if logical is None and (not line or line.startswith(("#", "!"))):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2:
            logical = (logical or "") + line[:-1]
            continue
        yield (logical or "") + line
        logical = None
    if logical:
        yield logical


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of a repeatable ``flag`` (``--override``, ``--consumer-property``)."""
    properties = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r} is not KEY=VALUE")
        properties[key.strip()] = value.strip()
    return properties
