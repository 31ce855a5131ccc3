"""What every ``zkcoord`` command family shares: exit codes, ``--zookeeper`` and the client it opens, table and
JSON output, Ctrl-C/SIGTERM handling, and the parsing of comma lists and Kafka-style properties.

Must not import a command family module (``zkcoord.cli.*``): they import this one.
"""

import argparse
import contextlib
import json
import re
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from zkcoord import env
from zkcoord.errors import ZkcoordError
from zkcoord.tables import format_table
from zkcoord.zk.acl import start_logged_in
from zkcoord.zk.client import tool_client
from zkcoord.zk.credentials import zookeeper_security

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2
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
        raise UsageError(f"cannot connect to ZooKeeper at {hosts} within {CONNECT_TIMEOUT_S:.0f}s") from None
    try:
        if chroot:
            if create_chroot:
                client.ensure_path("/" + chroot)
            client.chroot = "/" + chroot.rstrip("/")
        yield client
    finally:
        client.stop()
        client.close()


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    """``rows`` under ``header`` as Kafka's tools print tables."""
    print(format_table(header, rows))


def emit_json(value: object) -> None:
    """``value`` as indented JSON with sorted keys (what ``--json`` prints)."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def interrupt_event() -> threading.Event:
    """An event set by Ctrl-C or SIGTERM; install it before starting what they should stop."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


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
