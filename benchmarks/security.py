"""The cost of TLS and SASL on the msgpack listener, against plaintext in the same run.

One embedded ZooKeeper and one coordinator node per listener protocol (benchmarks/coordinator_load.py ``serve``,
default settings but group.initial.rebalance.delay.ms=500 and the msgpack listener's protocol:
``listener.security.protocol.map=ZKCOORD:<protocol>``), each node in its own ZooKeeper chroot so that each owns
all its offsets partitions. Certificates come from a CA made for the run (trustme; RSA 2048 by default, as
Kafka's keytool examples make them): the node's ``ssl.keystore.location`` is one PEM file with the key and the
chain, the client trusts the CA and checks the node's address. SCRAM users are written where Kafka keeps them
(/config/users/<name>, 4096 iterations, Kafka's default). Clients connect through
``zkcoord.security.client.ClientSecurity`` as zkcoord's own tools do. In one run, prints:

1. heartbeats/s of joined members at steady state (the load generators of benchmarks/coordinator.py: the same
   members, connections and requests in flight for each protocol), with the node's CPU per 1000 requests;
   ``--rounds`` windows of each protocol, taking turns, and their medians;
2. durable simple OffsetCommits/s (1 partition per request, one group per connection, each answer after the
   fsync of its batch), likewise, with the requests per fsync (a connection is served one request at a time, so
   what delays an answer also shrinks the next batch);
3. connection set-up: one client opens connections one after another, each until the answer to its first
   ApiVersions (after the TLS handshake and the SASL exchange, where the protocol has them): mean and p99, and
   the node's and the client's CPU per connection; PLAINTEXT, SSL, SASL_PLAINTEXT with SCRAM-SHA-256 and
   SCRAM-SHA-512, SASL_SSL with SCRAM-SHA-256; and how long the ZooKeeper read of a credential takes, which the
   node makes at a user's first login only (then a watch keeps it current);
4. the ratios to plaintext.

The machine has few cores: the node (one gevent hub, one core at most) and the load generators compete for
them, so a protocol that costs the client more CPU also leaves the node less, and other processes on the machine
move the rates from one window to the next; the node's CPU per request is the steadier measure of what TLS costs.
The CPU columns show who used what.
Every process is stopped and the temporary directory (under the repository's var/) removed at the end. About 2
minutes on 2 cores.

    python benchmarks/security.py [--seconds 2] [--rounds 3] [--connections 300] [--key-type rsa|ecdsa]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import trustme
from coordinator import (
    Scale,
    Server,
    Throughput,
    Workers,
    bench_directory,
    create_topics,
    machine,
    measure_window,
    process_cpu_seconds,
)
from coordinator_load import process_cpu
from kazoo.client import KazooClient

from zkcoord.auth.scram import make_credential
from zkcoord.channel import WireConnection
from zkcoord.security.client import ClientSecurity, Connect
from zkcoord.zk.server import EmbeddedZooKeeper
from zkcoord.zk.users import scram_credential, set_scram_credential

HOST = "127.0.0.1"
TOPIC, TOPIC_PARTITIONS = "bench-security", 10
SESSION_TIMEOUT_MS = 45_000
USER, PASSWORD = "bench", "bench-secret"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
THROUGHPUT_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
# (label, listener protocol, SASL mechanism): the connection set-ups measured
SETUPS = (
    ("PLAINTEXT", "PLAINTEXT", ""),
    ("SSL", "SSL", ""),
    ("SASL_PLAINTEXT SCRAM-SHA-256", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT SCRAM-SHA-512", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL SCRAM-SHA-256", "SASL_SSL", "SCRAM-SHA-256"),
)
INITIAL_REBALANCE_DELAY_MS = 500
WARM_UP_CONNECTIONS = 20
SETUP_BLOCK = 25
ZOOKEEPER_READS = 300


@dataclass(frozen=True)
class Tls:
    """The files of the run's CA: the node's keystore (key and chain) and the CA the clients trust."""

    keystore: Path
    ca: Path
    key_type: str


def make_certificates(directory: Path, key_type: str) -> Tls:
    """A CA and the node's certificate for HOST, both with ``key_type`` keys, as PEM files in ``directory``."""
    kind = trustme.KeyType[key_type.upper()]
    ca = trustme.CA(key_type=kind)
    keystore, ca_file = directory / "node-keystore.pem", directory / "ca.pem"
    ca.issue_cert(HOST, key_type=kind).private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(ca_file))
    return Tls(keystore, ca_file, key_type)


def node_properties(protocol: str, tls: Tls) -> dict[str, str]:
    properties = {
        "listener.security.protocol.map": f"ZKCOORD:{protocol}",
        # Every protocol's members join at once, on a busy machine: a member whose JoinGroup comes after the initial
        # delay starts a second rebalance, which waits the rebalance timeout (60 s) for members already synced.
        "group.initial.rebalance.delay.ms": str(INITIAL_REBALANCE_DELAY_MS),
    }
    if protocol in ("SSL", "SASL_SSL"):
        properties["ssl.keystore.location"] = str(tls.keystore)
    if protocol.startswith("SASL_"):
        properties["sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
    return properties


def client_properties(protocol: str, tls: Tls, mechanism: str = MECHANISMS[0]) -> dict[str, str]:
    """Kafka client properties (as a --command-config file holds them) for a client of ``protocol``."""
    properties = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        properties["ssl.ca.location"] = str(tls.ca)
    if protocol.startswith("SASL_"):
        properties |= {"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD}
    return properties


def start_node(root: Path, zk: EmbeddedZooKeeper, protocol: str, tls: Tls) -> tuple[Server, str]:
    """A node whose msgpack listener speaks ``protocol``, in a chroot of its own with the topic and the users."""
    connect = f"{zk.connect_string}/bench-{protocol.lower()}"
    create_topics(zk.connect_string, connect, {TOPIC: TOPIC_PARTITIONS})
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        for mechanism in MECHANISMS:
            set_scram_credential(client, USER, mechanism, make_credential(mechanism, PASSWORD))
    finally:
        client.stop()
        client.close()
    directory = root / protocol.lower()
    directory.mkdir()
    connector = ClientSecurity.from_properties(client_properties(protocol, tls)).connector(socket.create_connection)
    server = Server(directory, connect, directory / "server.prof", node_properties(protocol, tls), connector)
    return server, connect


# ---- 1 and 2: steady state -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Steady:
    protocol: str
    run: Throughput

    @property
    def node_ms_per_1000(self) -> float:
        """The node's CPU milliseconds per 1000 requests over the window."""
        before, after = self.run.server_before, self.run.server_after
        return (after["cpu"] - before["cpu"]) * 1e6 / max(1, after["requests"] - before["requests"])

    @property
    def requests_per_fsync(self) -> float | None:
        """None when the window had no fsync (heartbeats write nothing)."""
        before, after = self.run.server_before, self.run.server_after
        fsyncs = after["fsyncs"] - before["fsyncs"]
        return (after["requests"] - before["requests"]) / fsyncs if fsyncs else None


def per_fsync(values: list[float | None]) -> str:
    """The median of ``values``, right-aligned for the requests/fsync column; '-' without fsyncs."""
    found = [value for value in values if value is not None]
    return f"{statistics.median(found):>14,.1f}" if found else f"{'-':>14}"


def heartbeat_params(server: Server, protocol: str, tls: Tls, scale: Scale, load: str) -> dict:
    return {
        "address": server.address,
        "security": client_properties(protocol, tls),
        "groups": [f"hb-{load}-{g}" for g in range(scale.heartbeat_groups)],
        "members": scale.heartbeat_members,
        "topic": TOPIC,
        "partitions": TOPIC_PARTITIONS,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "connections": scale.heartbeat_connections,
        "depth": scale.heartbeat_depth,
    }


def commit_params(server: Server, protocol: str, tls: Tls, scale: Scale, load: str) -> dict:
    return {
        "address": server.address,
        "security": client_properties(protocol, tls),
        "groups": [f"commit-{load}-{c}" for c in range(scale.commit_connections)],
        "topic": TOPIC,
        "topic_partitions": TOPIC_PARTITIONS,
        "partitions_per_request": 1,
        "depth": scale.commit_depth,
    }


def steady_phase(
    kind: str, servers: dict[str, Server], zookeeper_pid: int, tls: Tls, scale: Scale, rounds: int
) -> dict[str, list[Steady]]:
    """``rounds`` windows of each protocol, taking turns (each round starting one protocol later), so that a burst
    of other work on the machine falls on every protocol alike. Each round's load generators of every protocol set
    up at once, then wait for their window."""
    make_params = heartbeat_params if kind == "heartbeat" else commit_params
    print(
        f"   {'round':>5} {'protocol':<10} {'per second':>11} {'node CPU ms/1000 requests':>26} {'requests/fsync':>14}"
        f"  CPU cores"
    )
    results: dict[str, list[Steady]] = {protocol: [] for protocol in THROUGHPUT_PROTOCOLS}
    for round_number in range(rounds):
        shift = round_number % len(THROUGHPUT_PROTOCOLS)
        order = THROUGHPUT_PROTOCOLS[shift:] + THROUGHPUT_PROTOCOLS[:shift]
        workers: dict[str, Workers] = {}
        try:
            for protocol in order:
                params = [
                    make_params(servers[protocol], protocol, tls, scale, f"{round_number}-{load}")
                    for load in range(scale.load_processes)
                ]
                workers[protocol] = Workers(kind, params)
            for protocol in order:
                workers[protocol].collect("ready", timeout=180)
            for protocol in order:
                run = measure_window(workers[protocol], scale, servers[protocol], zookeeper_pid)
                result = Steady(protocol, run)
                results[protocol].append(result)
                print(
                    f"   {round_number + 1:>5} {protocol:<10} {run.rate:>11,.0f} {result.node_ms_per_1000:>26,.0f} "
                    f"{per_fsync([result.requests_per_fsync])}  {run.cpu}"
                    + (f"  errors {run.errors}" if run.errors else ""),
                    flush=True,
                )
        finally:
            for started in workers.values():
                started.close()
    print(f"   {'median':>5}")
    for protocol, runs in results.items():
        print(
            f"   {'':>5} {protocol:<10} {statistics.median(r.run.rate for r in runs):>11,.0f} "
            f"{statistics.median(r.node_ms_per_1000 for r in runs):>26,.0f} "
            f"{per_fsync([r.requests_per_fsync for r in runs])}"
        )
    return results


# ---- 3: connection set-up ----------------------------------------------------------------------------------


@dataclass
class SetUp:
    """One case of SETUPS: its node and connector, then each connection's seconds until its ApiVersions answer
    and the CPU seconds the node and the client spent on them all."""

    label: str
    server: Server
    connect: Connect
    seconds: list[float] = field(default_factory=list)
    node_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    def run(self, count: int) -> None:
        node_cpu, client_cpu = process_cpu_seconds(self.server.process.pid), process_cpu()
        self.seconds.extend(connect_once(self.server.address, self.connect) for _ in range(count))
        self.node_cpu_s += process_cpu_seconds(self.server.process.pid) - node_cpu
        self.client_cpu_s += process_cpu() - client_cpu

    @property
    def node_ms(self) -> float:
        """The node's CPU milliseconds per connection."""
        return self.node_cpu_s * 1000 / len(self.seconds)

    @property
    def client_ms(self) -> float:
        return self.client_cpu_s * 1000 / len(self.seconds)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.seconds)

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.seconds, n=100)[98]


def connect_once(address: tuple[str, int], create_connection) -> float:
    """Seconds from connecting until the first ApiVersions answer, the TLS handshake and SASL included."""
    started = time.perf_counter()
    conn = WireConnection(*address, client_id="bench-setup", create_connection=create_connection)
    try:
        conn.call("ApiVersions")
        return time.perf_counter() - started
    finally:
        conn.close()


def measure_setups(servers: dict[str, Server], tls: Tls, count: int) -> list[SetUp]:
    """``count`` connections of each case of SETUPS, in blocks of SETUP_BLOCK taking turns (so that a burst of
    other work on the machine falls on every case alike), after WARM_UP_CONNECTIONS untimed ones each."""
    cases = []
    for label, protocol, mechanism in SETUPS:
        security = ClientSecurity.from_properties(client_properties(protocol, tls, mechanism))
        cases.append(SetUp(label, servers[protocol], security.connector(socket.create_connection)))
    for case in cases:
        for _ in range(WARM_UP_CONNECTIONS):
            connect_once(case.server.address, case.connect)
    for block in range(0, count, SETUP_BLOCK):
        for case in cases:
            case.run(min(SETUP_BLOCK, count - block))
    return cases


def tls_description(server: Server, tls: Tls) -> str:
    connector = ClientSecurity.from_properties(client_properties("SSL", tls)).connector(socket.create_connection)
    sock = connector(server.address, timeout=10)
    try:
        return f"{sock.version()}, {sock.cipher()[0]}, {tls.key_type.upper()} certificate"
    finally:
        sock.close()


def zookeeper_read_seconds(connect: str) -> list[float]:
    """Seconds of the read a node makes for each SCRAM login (the user's /config/users znode), from here."""
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        seconds = []
        for _ in range(ZOOKEEPER_READS):
            started = time.perf_counter()
            scram_credential(client, USER, MECHANISMS[0])
            seconds.append(time.perf_counter() - started)
        return seconds
    finally:
        client.stop()
        client.close()


def setup_phase(servers: dict[str, Server], tls: Tls, count: int) -> list[SetUp]:
    print(
        f"   {'listener':<29} {'n':>4} {'mean ms':>8} {'p99 ms':>7} {'x plaintext':>11} {'node CPU ms':>11} "
        f"{'client CPU ms':>13}"
    )
    results = measure_setups(servers, tls, count)
    for result in results:
        print(
            f"   {result.label:<29} {count:>4} {result.mean * 1000:>8.2f} {result.p99 * 1000:>7.2f} "
            f"{result.mean / results[0].mean:>10.1f}x {result.node_ms:>11.2f} {result.client_ms:>13.2f}"
        )
    return results


# ---- main ------------------------------------------------------------------------------------------------------


def ratio_rows(title: str, results: dict[str, list[Steady]]) -> None:
    """The medians of each protocol against plaintext's: the rate, and the node's CPU per request."""
    rates = {protocol: statistics.median(r.run.rate for r in runs) for protocol, runs in results.items()}
    cpu = {protocol: statistics.median(r.node_ms_per_1000 for r in runs) for protocol, runs in results.items()}
    for protocol in THROUGHPUT_PROTOCOLS[1:]:
        print(
            f"   {title} {protocol:<9} {rates[protocol] / rates['PLAINTEXT']:>6.2f}x plaintext's rate "
            f"({rates[protocol]:,.0f} vs {rates['PLAINTEXT']:,.0f}/s); node CPU per request "
            f"{cpu[protocol] / cpu['PLAINTEXT']:.2f}x ({cpu[protocol]:,.0f} vs {cpu['PLAINTEXT']:,.0f} ms/1000)"
        )


def summary(
    heartbeats: dict[str, list[Steady]],
    commits: dict[str, list[Steady]],
    setups: list[SetUp],
    reads: list[float],
) -> None:
    print("\nSummary: cost against plaintext, same run (throughput: medians of the rounds)\n")
    ratio_rows("heartbeats/s", heartbeats)
    ratio_rows("commits/s   ", commits)
    base = setups[0]
    for result in setups[1:]:
        print(
            f"   connection set-up {result.label:<29} {result.mean / base.mean:>6.1f}x plaintext's mean "
            f"({result.mean * 1000:.2f} vs {base.mean * 1000:.2f} ms), p99 {result.p99 / base.p99:.1f}x "
            f"({result.p99 * 1000:.2f} vs {base.p99 * 1000:.2f} ms)"
        )
    scram = next(result for result in setups if result.label == "SASL_PLAINTEXT SCRAM-SHA-256")
    print(
        f"   a SCRAM-SHA-256 login takes {scram.mean * 1000:.2f} ms with the credential in the node's memory; a "
        f"ZooKeeper read of it, which only a user's first login makes, {statistics.fmean(reads) * 1000:.2f} ms mean / "
        f"{statistics.quantiles(reads, n=100)[98] * 1000:.2f} ms p99 from a kazoo client; the client's PBKDF2 "
        f"(4096 iterations) is in its CPU column"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured window of each throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput windows of each protocol, taking turns")
    parser.add_argument("--connections", type=int, default=300, help="connections timed per set-up case")
    parser.add_argument("--key-type", choices=("rsa", "ecdsa"), default="rsa", help="the node certificate's key")
    args = parser.parse_args()
    # 2 load processes x 2 groups x 50 members; 20 connections x 16 heartbeats in flight, 32 x 4 commits, each
    scale = Scale(1.0, args.seconds, 2, 2, 50, 20, 16, 32, 4, 0, 0, {})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the cleanup below runs
    with bench_directory("security-bench-") as root:
        started = time.monotonic()
        servers: dict[str, Server] = {}
        zk = EmbeddedZooKeeper(data_dir=root / "zookeeper", tick_time_ms=2000, max_session_timeout_ms=60_000)
        try:
            print(f"Machine: {machine()}")
            print(
                f"Note: {os.cpu_count()} cores for the node, its load generators and ZooKeeper together: the figures "
                f"are of a machine where client and node compete for CPU",
                flush=True,
            )
            zk.start()
            zookeeper_pid = zk._process.pid if zk._process is not None else 0
            tls = make_certificates(root, args.key_type)
            connects = {}
            for protocol in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                servers[protocol], connects[protocol] = start_node(root, zk, protocol, tls)
            for server in servers.values():
                server.wait_loaded()
                server.wait_topics({TOPIC: TOPIC_PARTITIONS})
            print(
                f"ZooKeeper {zk.connect_string}; one node per msgpack listener protocol ("
                + ", ".join(f"{p} on port {s.address[1]}" for p, s in servers.items())
                + f"); TLS: {tls_description(servers['SSL'], tls)}; {time.monotonic() - started:.1f} s to set up",
                flush=True,
            )
            members = scale.load_processes * scale.heartbeat_groups * scale.heartbeat_members
            connections = scale.load_processes * scale.heartbeat_connections
            print(
                f"\n1. Heartbeats of {members} joined members ({scale.heartbeat_members} per group) over {connections} "
                f"connections from {scale.load_processes} processes, {scale.heartbeat_depth} in flight per "
                f"connection; {scale.warmup_seconds:g} s warm-up, {scale.measure_seconds:g} s measured",
                flush=True,
            )
            heartbeats = steady_phase("heartbeat", servers, zookeeper_pid, tls, scale, args.rounds)
            connections = scale.load_processes * scale.commit_connections
            print(
                f"\n2. Durable OffsetCommits (1 partition per request, generation -1), one group per connection, "
                f"{connections} connections from {scale.load_processes} processes, {scale.commit_depth} in flight per "
                f"connection",
                flush=True,
            )
            commits = steady_phase("commit", servers, zookeeper_pid, tls, scale, args.rounds)
            print(
                f"\n3. Connection set-up, one connection at a time from one client (after {WARM_UP_CONNECTIONS} "
                f"untimed; the cases take turns in blocks of {SETUP_BLOCK}): connect, TLS handshake, SASL exchange, "
                f"then ApiVersions until its answer; CPU per connection (the node's from /proc, in 10 ms ticks)",
                flush=True,
            )
            setups = setup_phase(servers, tls, args.connections)
            reads = zookeeper_read_seconds(connects["SASL_PLAINTEXT"])
            summary(heartbeats, commits, setups, reads)
        finally:
            Workers.stop_all()
            for server in servers.values():
                server.stop()  # while ZooKeeper still runs: the node resigns its partitions there
            zk.stop()


if __name__ == "__main__":
    main()
