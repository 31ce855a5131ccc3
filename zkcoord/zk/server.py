"""Run a standalone ZooKeeper server from jars already on the machine.

Looks for the jars in ``ZOOKEEPER_CLASSPATH``, then inside the installed ``pyspark`` package, then
Debian's ``/usr/share/java/zookeeper.jar``. Readiness is ``srvr`` reporting ``Mode: standalone``
(``ruok`` answers before the server serves).
"""

import contextlib
import importlib.util
import logging
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from zkcoord import env
from zkcoord.errors import ZooKeeperNotFoundError, ZooKeeperStartError

log = logging.getLogger(__name__)

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SASL_AUTHENTICATION_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
JAVA_HINT = "install a Java runtime (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
_LOG4J2_CONFIG = """status = warn
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %p %c{1}: %m%n
"""


def find_java() -> str:
    """Path of the ``java`` executable, or a :class:`ZooKeeperNotFoundError` that says how to get one."""
    java_home = env.java_home()
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotFoundError(f"no java found on PATH: {JAVA_HINT}")
    return java


def find_zookeeper_classpath() -> str:
    """A classpath that holds ``org.apache.zookeeper.server.ZooKeeperServerMain`` and its dependencies."""
    configured = env.zookeeper_classpath()
    if configured:
        return configured
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin is not None:
        jars = Path(spec.origin).parent / "jars"
        if any(jars.glob("zookeeper-[0-9]*.jar")):
            return f"{jars}/*"
    if DEBIAN_ZOOKEEPER_JAR.exists():
        return f"{DEBIAN_ZOOKEEPER_JAR}:{DEBIAN_ZOOKEEPER_JAR.parent}/*"
    raise ZooKeeperNotFoundError(
        "no ZooKeeper jars found: install pyspark (pip install pyspark), set ZOOKEEPER_CLASSPATH, "
        "or install Debian's zookeeper package"
    )


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``srvr``, ``ruok`` ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(word.encode("ascii"))
        chunks = []
        while chunk := conn.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def is_serving(host: str, port: int) -> bool:
    """True once ``srvr`` reports a serving server (``ruok`` answers before it serves)."""
    try:
        return "Mode: standalone" in four_letter_word(host, port, "srvr", timeout=0.5)
    except OSError:
        return False


def free_port(host: str) -> int:
    """A port nobody listens on at ``host`` now (the usual race until the caller binds it)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def port_to_return_to(host: str) -> int:
    """A free port below the kernel's ephemeral range, for a server that restarts on the same port.

    While such a server is down its clients keep reconnecting, and a connection to a port in the ephemeral range
    can be given that very port as its own (a TCP self-connect), which the server then cannot bind again."""
    try:
        return free_port_block(host, 1)
    except OSError:  # nothing free below the ephemeral range: any free port, with the self-connect risk
        return free_port(host)


def free_port_block(host: str, count: int) -> int:
    """The first of ``count`` consecutive free ports below the kernel's ephemeral range (see
    :func:`port_to_return_to`), e.g. a Kafka listener and its gateway ports."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    for first in random.sample(range(10_000, low - count), 200):
        with contextlib.ExitStack() as probes:
            try:
                for port in range(first, first + count):
                    probes.enter_context(socket.socket()).bind((host, port))
            except OSError:
                continue
            return first
    raise OSError(f"no {count} consecutive free ports on {host}")


def _refuse_a_busy_port(host: str, port: int) -> None:
    """A ZooKeeperStartError when something listens on ``host:port`` already (another ZooKeeper would answer our
    readiness check while our JVM dies on its BindException). SO_REUSEADDR, as ZooKeeper binds: a port in
    TIME_WAIT after a restart is free."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ZooKeeperStartError(f"cannot serve on {host}:{port}: {error.strerror or error}") from None


class EmbeddedZooKeeper:
    """A standalone ZooKeeper server in a child JVM; also a context manager.

    ``tick_time_ms`` bounds session timeouts to [2, 20] ticks unless ``max_session_timeout_ms`` is given;
    tests use a short tick so that expiry costs well under a second. ``sasl_users`` (user → password) turns on
    SASL/digest logins, as a secured Kafka's ZooKeeper runs; clients without credentials are still served.
    """

    def __init__(
        self,
        port: int = 0,
        data_dir: str | os.PathLike | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
        max_session_timeout_ms: int | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ):
        self.host = host
        self.sasl_users = dict(sasl_users or {})
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 20 * tick_time_ms
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="zkcoord-zk-"))
        self._process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2_CONFIG)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=srvr,ruok,stat,cons,mntr",
                    *([f"authProvider.1={SASL_AUTHENTICATION_PROVIDER}"] if self.sasl_users else []),
                    "",
                ]
            )
        )
        return config

    def _sasl_options(self) -> list[str]:
        """The JVM options of SASL/digest logins: a JAAS file with a ``Server`` section of the users."""
        if not self.sasl_users:
            return []
        users = "".join(f'\n  user_{name}="{password}"' for name, password in self.sasl_users.items())
        jaas = self.data_dir / "zookeeper_jaas.conf"
        jaas.write_text(f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n")
        return [
            f"-Djava.security.auth.login.config={jaas}",
            f"-Dzookeeper.authProvider.1={SASL_AUTHENTICATION_PROVIDER}",
        ]

    def start(self, timeout: float = 60.0) -> "EmbeddedZooKeeper":
        """Start the JVM and wait until ``srvr`` reports ``Mode: standalone``; a :class:`ZooKeeperStartError` in
        one line (the server's log at DEBUG) when it does not, with the server stopped and its own data removed."""
        try:
            return self._start(timeout)
        except BaseException:  # Ctrl-C during start-up too: __exit__ does not run when __enter__ raises
            self.stop()
            raise

    def _start(self, timeout: float) -> "EmbeddedZooKeeper":
        _refuse_a_busy_port(self.host, self.port)
        config = self._write_config()
        command = [
            find_java(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            *self._sasl_options(),
            "-cp",
            find_zookeeper_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
        ]
        with open(self.log_path, "ab") as log_file:
            self._process = subprocess.Popen(
                [*command, str(config)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches whoever started it, which stops it after its clients
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Alive after srvr answered: srvr alone can be answered by another server that got the port first.
            serving = is_serving(self.host, self.port)
            if self._process.poll() is not None:
                raise self._start_error(f"ZooKeeper exited with code {self._process.returncode} during start-up")
            if serving:
                log.info("zookeeper serving host=%s port=%d data_dir=%s", self.host, self.port, self.data_dir)
                return self
            time.sleep(0.05)
        raise self._start_error(f"ZooKeeper did not serve within {timeout:g} s")

    def _start_error(self, what: str) -> ZooKeeperStartError:
        """``what`` in one line; the log's tail goes to DEBUG, as a log it created itself is removed with its data."""
        log.debug("ZooKeeper's log %s:\n%s", self.log_path, self._log_tail())
        if self._owns_data_dir:
            return ZooKeeperStartError(f"{what} (its log is shown with --log-level DEBUG)")
        return ZooKeeperStartError(f"{what}; see {self.log_path}")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove a data directory it created itself."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; its data directory stays for :meth:`start`."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> "EmbeddedZooKeeper":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
