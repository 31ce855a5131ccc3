"""The processes of one fault run and how the nemesis hits each of them.

Every coordinator node reaches ZooKeeper through a proxy of its own and is reached by clients through another
(it advertises the proxy's port), and fsyncs through a shim that can slow it; every legacy member reaches
ZooKeeper through a proxy of its own. So a partition, a session expiry (a link stalled past the session
timeout) or a slow fsync hits one process and nothing else. The nodes share one log directory, as in
production, on a disk the nemesis can fill; SIGKILL, SIGSTOP and a ZooKeeper restart hit the processes.
"""

import contextlib
import logging
import signal
from collections.abc import Callable
from pathlib import Path

from zkcoord.compare.processes import MemberProcess
from zkcoord.faults import schedule
from zkcoord.faults.disk import LogDisk
from zkcoord.faults.fsync import SlowFsync
from zkcoord.faults.proxy import LoopbackProxy
from zkcoord.faults.schedule import Fault
from zkcoord.testing.node_process import HOST, NodeProcess
from zkcoord.zk.server import EmbeddedZooKeeper, free_port_block, port_to_return_to

log = logging.getLogger(__name__)


class NodeSlot:
    """One coordinator node id: its proxies, fsync shim and ports outlive the processes that fill the slot.

    Every node serves Kafka's protocol too, on a Kafka port and one gateway port (for broker 0, the run's only
    broker) fixed for the slot, so a restarted node comes back where librdkafka members last found it.
    """

    def __init__(
        self, node_id: int, zk_address: tuple[str, int], chroot: str, log_dir: Path, workdir: Path, overrides: dict
    ):
        self.node_id = node_id
        self.log_dir = log_dir
        self.name = f"node-{node_id}"
        self.chroot = chroot
        self.workdir = workdir
        self.port = port_to_return_to(HOST)  # fixed, so a restarted node sits behind the same client proxy
        self.kafka_port = free_port_block(HOST, 2)
        self.overrides = {**overrides, "zkcoord.gateway.port.range": f"{self.kafka_port + 1}-{self.kafka_port + 1}"}
        self.zk_proxy = LoopbackProxy(zk_address, f"{self.name}->zookeeper").start()
        self.client_proxy = LoopbackProxy((HOST, self.port), f"clients->{self.name}").start()
        self.fsync = SlowFsync(workdir / f"{self.name}.fsync-delay")
        self.process: NodeProcess | None = None

    def start(self) -> NodeProcess:
        self.process = NodeProcess(
            self.node_id,
            self.zk_proxy.connect_string + self.chroot,
            self.log_dir,
            self.overrides,
            self.workdir,
            log_level="INFO",
            port=self.port,
            advertised_port=self.client_proxy.port,
            kafka_port=self.kafka_port,
            env=self.fsync.env(),
        )
        return self.process

    def close(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.signal(signal.SIGCONT)  # a stopped process would not take SIGTERM
            self.process.stop()
        self.fsync.heal()
        self.client_proxy.close()
        self.zk_proxy.close()


class MemberSlot:
    """One member name: its ZooKeeper proxy (legacy members) outlives the instances that fill the slot.

    ``kind`` is the member's (``zkcoord.compare.member``), ``group`` the kind of group it is in: its own kind,
    or the mixed group's.
    """

    def __init__(self, name: str, kind: str, zk_address: tuple[str, int], group: str | None = None):
        self.name = name
        self.kind = kind
        self.group = group or kind
        self.zk_proxy = LoopbackProxy(zk_address, f"{name}->zookeeper").start() if kind == "legacy" else None
        self.process: MemberProcess | None = None

    def close(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.resume()
            self.process.close()
        if self.zk_proxy is not None:
            self.zk_proxy.close()


class Nemesis:
    """Injects and heals the faults of a schedule on a run's slots; ``emit`` records each as it happens.

    ``start_member(name)`` and ``start_node(slot)`` restart a killed process (the run knows how to build them).
    """

    def __init__(
        self,
        zookeeper: EmbeddedZooKeeper,
        disk: LogDisk,
        nodes: dict[str, NodeSlot],
        members: dict[str, MemberSlot],
        emit: Callable[..., None],
        start_member: Callable[[str], None],
        start_node: Callable[[NodeSlot], None],
    ):
        self.zookeeper = zookeeper
        self.disk = disk
        self.nodes = nodes
        self.members = members
        self.emit = emit
        self.start_member = start_member
        self.start_node = start_node

    def inject(self, fault: Fault) -> None:
        self.emit("compare.fault", fault=fault.kind, target=fault.target, event="injected", hold_ms=fault.hold_ms)
        getattr(self, "_" + fault.kind.replace("-", "_"))(fault, inject=True)

    def heal(self, fault: Fault) -> None:
        getattr(self, "_" + fault.kind.replace("-", "_"))(fault, inject=False)
        self.emit("compare.fault", fault=fault.kind, target=fault.target, event="healed")

    # -- one method per kind: inject when ``inject``, else heal --

    def _kill_node(self, fault: Fault, inject: bool) -> None:
        slot = self.nodes[fault.target]
        if inject:
            slot.process.kill()
            self.emit("compare.node", node_id=slot.node_id, event="killed")
        else:
            self.start_node(slot)

    def _pause_node(self, fault: Fault, inject: bool) -> None:
        slot = self.nodes[fault.target]
        slot.process.signal(signal.SIGSTOP if inject else signal.SIGCONT)
        self.emit("compare.node", node_id=slot.node_id, event="paused" if inject else "resumed")

    def _kill_member(self, fault: Fault, inject: bool) -> None:
        if inject:
            process = self.members[fault.target].process
            process.kill()
            self.emit("compare.member", member=fault.target, instance=process.instance, event="killed")
        else:
            self.start_member(fault.target)

    def _pause_member(self, fault: Fault, inject: bool) -> None:
        process = self.members[fault.target].process
        (process.pause if inject else process.resume)()
        self.emit(
            "compare.member", member=fault.target, instance=process.instance, event="paused" if inject else "resumed"
        )

    def _zk_restart(self, fault: Fault, inject: bool) -> None:
        if inject:
            self.zookeeper.kill()
        else:
            self.zookeeper.start()

    def _zk_link(self, target: str) -> LoopbackProxy:
        slot = self.nodes.get(target) or self.members[target]
        return slot.zk_proxy

    def _session_expiry(self, fault: Fault, inject: bool) -> None:
        link = self._zk_link(fault.target)
        link.stall() if inject else link.heal()  # stalled past the session timeout: the server expires it

    def _partition_zk(self, fault: Fault, inject: bool) -> None:
        link = self._zk_link(fault.target)
        link.cut() if inject else link.heal()

    def _partition_clients(self, fault: Fault, inject: bool) -> None:
        link = self.nodes[fault.target].client_proxy
        link.stall() if inject else link.heal()

    def _full_disk(self, fault: Fault, inject: bool) -> None:
        for slot in self.nodes.values():  # on a tmpfs the first fill fills it for all
            if slot.process.alive():
                pid = slot.process.process.pid
                self.disk.fill(pid) if inject else self.disk.heal(pid)

    def _slow_fsync(self, fault: Fault, inject: bool) -> None:
        shim = self.nodes[fault.target].fsync
        shim.slow(fault.delay_ms) if inject else shim.heal()


def available_kinds(kinds: list[str], probe: SlowFsync) -> list[str]:
    """``kinds`` without those this machine cannot inject (a slow fsync needs a C compiler for its shim)."""
    if schedule.SLOW_FSYNC in kinds and not probe.available:
        log.warning("no C compiler: the campaign injects no slow fsync")
        return [kind for kind in kinds if kind != schedule.SLOW_FSYNC]
    return kinds
