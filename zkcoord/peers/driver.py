"""The JVM member driver: ``LegacyMember.java`` beside this module, compiled once against the 0.8.2 jars.

It is a small program written only against Kafka 0.8.2's public Java API (docs/peers.md), so tests run the
real ``ZookeeperConsumerConnector`` with static subscriptions of several streams per topic, or a wildcard.
:func:`compiled_driver` compiles it with ``javac`` into ``classes-<digest of the source>`` in the peers cache
and reuses that folder until the source changes. Nothing here starts a member.
"""

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from zkcoord import peers
from zkcoord.zk.server import find_java

SOURCE = Path(__file__).with_name("LegacyMember.java")
MAIN_CLASS = "LegacyMember"


def _classes_dir() -> Path:
    return peers.cache_root() / f"classes-{hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]}"


def _javac() -> str:
    """``javac`` beside the ``java`` that runs the peers, else the one on PATH."""
    beside = Path(find_java()).resolve().with_name("javac")
    javac = str(beside) if beside.is_file() else shutil.which("javac")
    if javac is None:
        raise peers.PeerUnavailableError(
            "no javac beside java or on PATH: the 0.8.2 member driver is compiled at set-up and needs a JDK, "
            "not only a runtime (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)"
        )
    return javac


def compiled_driver(progress: Callable[[str], None] = lambda _message: None) -> Path:
    """The folder holding ``LegacyMember.class``, compiling it first (and resolving the jars) if need be."""
    classes = _classes_dir()
    if classes.is_dir():
        return classes
    classpath = peers.classpath(peers.LEGACY_CONSUMER)  # before the lock, which fetching takes too
    with peers.cache_lock():
        if classes.is_dir():  # another process compiled it while this one waited
            return classes
        progress(f"compiling {SOURCE.name} against {peers.LEGACY_CONSUMER.artifact} into {classes}")
        staging = Path(tempfile.mkdtemp(prefix=".classes-", dir=peers.cache_root()))
        try:
            # Java 8 class files: the driver then runs on any JVM the 0.8.2 jars run on.
            command = [_javac(), "--release", "8", "-Xlint:-options", "-cp", classpath, "-d", str(staging), str(SOURCE)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise peers.PeerUnavailableError(
                    f"javac could not compile {SOURCE.name}: {(done.stdout + done.stderr).strip()[-2000:]}"
                )
            staging.rename(classes)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return classes
