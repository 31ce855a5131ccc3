"""Consumer members (the pure :class:`GroupMember`) against a :class:`CoordinatorHarness`, on one virtual clock.

Each :class:`SimulatedMember` stands for a consumer: its requests go to the harness in order (a parked JoinGroup
holds the requests behind it, as on a real connection, wire-protocol.md §1), and a modelled poll side applies each
:class:`Reconcile` after ``callback_ms`` and acknowledges it. :class:`MembershipSimulation` steps every member
through the clock and checks, after every step, that no partition is read by two live members (a member whose
session is in doubt reads none of its partitions).
"""

from collections.abc import Iterable, Mapping

from zkcoord.assign.consumer import assignor_for
from zkcoord.membership import Fatal, GroupMember, MembershipConfig, MemberState, Reconcile, Send
from zkcoord.membership.member import ANY_NODE
from zkcoord.model import TopicPartition
from zkcoord.testing.coordinator import CoordinatorHarness, RequestHandle
from zkcoord.wire.codec import read_response

HARNESS_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "offsets.topic.num.partitions": 1,
}


class SimulatedMember:
    """One consumer: the membership core, its two connections, and a poll side that acks after ``callback_ms``."""

    def __init__(
        self,
        name: str,
        harness: CoordinatorHarness,
        group: str,
        strategies: Iterable[str] = ("range",),
        instance_id: str | None = None,
        session_timeout_ms: int = 3000,
        heartbeat_interval_ms: int = 300,
        max_poll_interval_ms: int = 60000,
        callback_ms: int = 0,
        metadata_max_age_ms: int = 300000,
    ):
        self.name = name
        self.harness = harness
        self.callback_ms = callback_ms
        config = MembershipConfig(
            group_id=group,
            group_instance_id=instance_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            retry_backoff_ms=100,
            request_timeout_ms=30000,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self.core = GroupMember(config, [assignor_for(s) for s in strategies], harness.now)
        self.owned: set[TopicPartition] = set()  # what the poll side believes it owns
        self.polling = True
        self.alive = True
        self.paused = False  # stopped (SIGSTOP): takes no step and counts for no one's exclusivity meanwhile
        self.fatal: Exception | None = None
        self.callbacks: list[tuple[str, tuple[TopicPartition, ...]]] = []
        self._connections: dict[str, list[tuple[RequestHandle, Send]]] = {"coordinator": [], ANY_NODE: []}
        self._due: list[tuple[int, Reconcile]] = []
        self._correlation = 0

    def reading(self, now: int) -> set[TopicPartition]:
        """The partitions the poll side hands out records of: those it owns, none while the session is in doubt."""
        return set() if self.core.session_in_doubt(now) else self.owned

    def step(self, now: int) -> None:
        if not self.alive:
            return
        for queue in self._connections.values():
            while queue and queue[0][0].done:
                handle, send = queue.pop(0)
                self.core.on_response(send.tag, read_response(send.api, handle.response), now)
        if self.polling:
            self.core.polled(now)
        self.core.tick(now)
        self._flush(now)
        while self._due and self._due[0][0] <= now:
            _, event = self._due.pop(0)
            self.owned -= set(event.lost) | set(event.revoked)
            for kind, partitions, run in (
                ("lost", event.lost, bool(event.lost)),
                ("revoked", event.revoked, event.run_revoked or bool(event.revoked)),
                ("assigned", event.assigned, event.run_assigned),
            ):
                if run:
                    self.callbacks.append((kind, partitions))
            self.owned |= set(event.assigned)
            self.core.ack(event.event_id, now)
            self._flush(now)

    def _flush(self, now: int) -> None:
        for send in self.core.take_sends():
            self._send(send)
        for event in self.core.take_events():
            if isinstance(event, Reconcile):
                self._due.append((now + self.callback_ms, event))
            elif isinstance(event, Fatal):
                self.fatal = event.error

    def _send(self, send: Send) -> None:
        self._correlation += 1
        request = {"api": send.api, "api_version": 0, "correlation_id": self._correlation, "client_id": self.name}
        handle = self.harness.send({**request, **send.fields})
        self._connections[send.target if send.target == ANY_NODE else "coordinator"].append((handle, send))

    def crash(self) -> None:
        """The process dies: nothing more is sent, nothing is owned (its session expires at the coordinator)."""
        self.alive = False
        self.owned = set()

    def close(self, now: int) -> None:
        """A clean close: revoke everything, then leave (dynamic members only, KIP-345)."""
        self.owned = set()
        self.core.leave(now)
        self._flush(now)
        self.step(now)
        self.alive = False


class MembershipSimulation:
    """Members of one group on a harness; :meth:`run` advances the clock and checks exclusive ownership."""

    def __init__(self, topics: Mapping[str, int], group: str = "g", seed: int = 0):
        self.harness = CoordinatorHarness(HARNESS_CONFIG, [0], seed=seed)
        self.harness.set_topics(dict(topics))
        self.topics = dict(topics)
        self.group = group
        self.members: list[SimulatedMember] = []
        self.ownership_timeline: list[dict[TopicPartition, str]] = []

    def add(self, name: str, **options) -> SimulatedMember:
        member = SimulatedMember(name, self.harness, self.group, **options)
        member.core.subscribe(sorted(self.topics), now_ms=self.harness.now)
        self.members.append(member)
        return member

    @property
    def live(self) -> list[SimulatedMember]:
        """The members that run: alive and not paused."""
        return [m for m in self.members if m.alive and not m.paused]

    def run(self, ms: int, step_ms: int = 10, check: bool = True) -> None:
        """Advance ``ms``; unless ``check`` is off, assert exclusive ownership after every member's step."""
        for _ in range(ms // step_ms):
            self.harness.advance(step_ms)
            for member in self.live:
                member.step(self.harness.now)
                if check:
                    self.check_exclusive()
            self.ownership_timeline.append(self.owners())

    def owners(self) -> dict[TopicPartition, str]:
        """Who reads each partition now."""
        return {tp: member.name for member in self.live for tp in member.reading(self.harness.now)}

    def check_exclusive(self) -> None:
        seen: dict[TopicPartition, str] = {}
        for member in self.live:
            for tp in member.reading(self.harness.now):
                if tp in seen:
                    raise AssertionError(f"{tp} owned by {seen[tp]} and {member.name} at {self.harness.now} ms")
                seen[tp] = member.name

    def all_partitions(self) -> set[TopicPartition]:
        return {TopicPartition(t, p) for t, n in self.topics.items() for p in range(n)}

    def settled(self) -> bool:
        """Every live member STABLE in one generation and every partition owned."""
        live = self.live
        generations = {m.core.generation for m in live}
        return (
            all(m.core.state == MemberState.STABLE for m in live)
            and len(generations) == 1
            and set(self.owners()) == self.all_partitions()
        )

    def run_until_settled(self, limit_ms: int = 60000, step_ms: int = 10) -> int:
        """Advance until :meth:`settled`; return the virtual ms it took (AssertionError after ``limit_ms``)."""
        start = self.harness.now
        while not self.settled():
            if self.harness.now - start > limit_ms:
                states = {m.name: (m.core.state.name, m.core.generation, sorted(m.owned)) for m in self.live}
                raise AssertionError(f"not settled after {limit_ms} ms: {states}")
            self.run(step_ms, step_ms)
        return self.harness.now - start
