"""Apache Kafka's own jars, the real peers zkcoord runs beside (docs/peers.md).

Each :class:`Peer` is a profile of ``pom.xml`` beside this module: Maven resolves it with its dependencies
(``dependency:copy-dependencies``) into a cache outside the repository, once; later calls reuse the cache until
the peer's profile changes. :func:`classpath` is what a ``java -cp`` needs. Nothing here starts a JVM.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from zkcoord import env
from zkcoord.errors import ZkcoordError

POM = Path(__file__).with_name("pom.xml")


class PeerUnavailableError(ZkcoordError):
    """A peer's jars are not in the cache and cannot be resolved here; the message says which and why."""


@dataclass(frozen=True)
class Peer:
    """One profile of the peers' pom: its id names the cache folder too."""

    profile: str
    artifact: str
    purpose: str


LEGACY_CONSUMER = Peer(
    "kafka-0.8.2.2", "org.apache.kafka:kafka_2.10:0.8.2.2", "the 0.8.2 high-level consumer and its tools"
)
BROKER = Peer("kafka-3.9.2", "org.apache.kafka:kafka_2.13:3.9.2", "a Kafka broker in ZooKeeper mode")
REBALANCE_VERIFIER = Peer(
    "kafka-1.1.1", "org.apache.kafka:kafka_2.11:1.1.1", "the last VerifyConsumerRebalance, the first that can pass"
)
TOOLS = Peer(
    "kafka-tools-3.9.2",
    "org.apache.kafka:kafka-tools:3.9.2",
    "Kafka 3.9's command-line tools (kafka-consumer-groups, kafka-console-consumer)",
)
KAFKA4 = Peer(
    "kafka-4.1.1",
    "org.apache.kafka:kafka_2.13:4.1.1",
    "a Kafka 4 broker in KRaft mode, with KIP-848's consumer group protocol",
)
PEERS = (LEGACY_CONSUMER, BROKER, REBALANCE_VERIFIER, TOOLS, KAFKA4)


def cache_root() -> Path:
    """``$ZKCOORD_PEERS_CACHE``, else ``$XDG_CACHE_HOME/zkcoord/peers``, else ``~/.cache/zkcoord/peers``."""
    configured = env.peers_cache()
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zkcoord" / "peers"


def _profile_digest(peer: Peer) -> str:
    """A digest of ``peer``'s profile in the pom, so that editing another profile keeps this one's cache."""
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    for profile in ElementTree.parse(POM).getroot().iterfind("m:profiles/m:profile", namespace):
        if profile.findtext("m:id", namespaces=namespace) == peer.profile:
            return hashlib.sha256(ElementTree.tostring(profile)).hexdigest()[:16]
    raise PeerUnavailableError(f"{POM} has no profile {peer.profile!r}")


def jar_dir(peer: Peer) -> Path:
    return cache_root() / peer.profile


def _stamp(peer: Peer) -> Path:
    return jar_dir(peer) / ".resolved"


def is_cached(peer: Peer) -> bool:
    stamp = _stamp(peer)
    return stamp.is_file() and stamp.read_text().strip() == _profile_digest(peer)


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """One writer at a time per cache, across processes (two test runs started together); not re-entrant."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _maven() -> str:
    maven = shutil.which("mvn")
    if maven is None:
        raise PeerUnavailableError(
            "Maven (mvn) is not on PATH: it resolves Kafka's jars from Maven Central "
            "(Debian/Ubuntu: apt-get install maven; macOS: brew install maven)"
        )
    return maven


def _maven_failure(peer: Peer, output: str) -> str:
    """The lines of Maven's output that say what failed, not its banner."""
    reasons = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines() if line.startswith("[ERROR] ")]
    banner = ("To see the full", "Re-run Maven", "For more information")
    reasons = [r for r in reasons if r and not r.startswith(banner)]
    return f"Maven could not resolve {peer.artifact} ({peer.purpose}): " + (
        "; ".join(reasons[:3]) or output.strip()[-1000:]
    )


def fetch(peer: Peer, progress: Callable[[str], None] = lambda _message: None) -> Path:
    """The folder holding ``peer``'s jars, resolving them through Maven first when the cache lacks them."""
    if is_cached(peer):
        return jar_dir(peer)
    with cache_lock():
        if is_cached(peer):  # another process resolved it while this one waited
            return jar_dir(peer)
        progress(f"resolving {peer.artifact} ({peer.purpose}) with Maven into {jar_dir(peer)}")
        staging = Path(tempfile.mkdtemp(prefix=f".{peer.profile}-", dir=cache_root()))
        work = Path(tempfile.mkdtemp(prefix="zkcoord-peers-pom-"))
        try:
            shutil.copy(POM, work / "pom.xml")  # Maven writes target/ beside the pom: keep it out of the package
            command = [
                _maven(),
                "--batch-mode",
                "--no-transfer-progress",
                "--file",
                str(work / "pom.xml"),
                "--activate-profiles",
                peer.profile,
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0 or not any(staging.glob("*.jar")):
                raise PeerUnavailableError(_maven_failure(peer, done.stdout + done.stderr))
            (staging / ".resolved").write_text(_profile_digest(peer) + "\n")
            shutil.rmtree(jar_dir(peer), ignore_errors=True)
            staging.rename(jar_dir(peer))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    progress(f"{peer.artifact}: {sum(1 for _ in jar_dir(peer).glob('*.jar'))} jars")
    return jar_dir(peer)


def classpath(peer: Peer) -> str:
    """A ``java -cp`` value holding ``peer`` and its dependencies (resolved first if need be)."""
    return str(fetch(peer) / "*")
