"""The ``zkcoord`` command.

Conventions for every subcommand: ``--zookeeper HOST:PORT[/chroot]`` (default ``$ZKCOORD_ZK_CONNECT``),
``--group``, ``--topic``, ``--json`` for machine output; exit 0 = ok, 1 = a check found a problem,
2 = usage or connection error, 130 = interrupted (Ctrl-C: one line on standard error, never a traceback).

One module per command family (``cluster``: zk, topics, brokers; ``legacy``; ``log``; ``coordinator``;
``groups``; ``acls``; ``users``: SCRAM credentials; ``migrate``; ``compare``: compare and pipeline; ``demo``), each
with its handlers and its ``register(commands)``; ``common`` holds what they share, ``parser`` puts them together.
Exports ``main`` and ``build_parser``.
"""

import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from kazoo.exceptions import KazooException, NoAuthError

from zkcoord.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    interruption_message,
    mark_interrupted,
    reset_interruption,
)
from zkcoord.cli.parser import build_parser
from zkcoord.errors import ConfigError, LogError, StopRequested, ZkcoordError
from zkcoord.zk import admin

__all__ = ["build_parser", "main"]

NO_AUTH_HINT = (
    "the znode's ACL (zookeeper.set.acl) lets only zkcoord's ZooKeeper user change it; give that login with "
    "-Djava.security.auth.login.config=FILE in $KAFKA_OPTS (docs/security.md)"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zkcoord`` command line ``argv`` (default: ``sys.argv[1:]``); the exit code. The SIGINT and SIGTERM
    handlers a command installs are its own: the caller's are back when it returns."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _run(argv)
    except KeyboardInterrupt:  # Ctrl-C wherever it came, after the command's cleanup ran
        mark_interrupted()
        code = EXIT_OK
    except StopRequested:  # SIGTERM during a start-up, after the command's cleanup ran: a requested stop
        code = EXIT_OK
    finally:
        if threading.current_thread() is threading.main_thread():  # only there can a command have set them
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    message = interruption_message()
    if message is None:
        return code
    print(message, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its command; errors it expects become their exit code and one line on stderr."""
    reset_interruption()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except BrokenPipeError:  # `zkcoord log dump ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (UsageError, ConfigError, admin.AdminError, LogError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except NoAuthError:
        print(f"error: ZooKeeper refused the change: {NO_AUTH_HINT}", file=sys.stderr)
        return EXIT_USAGE
    except (ZkcoordError, KazooException) as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_USAGE
