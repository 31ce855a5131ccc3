"""A legacy member's lifecycle: its states, the transitions allowed between them, and the events that move it.

A member registers once per ZooKeeper session: an expiry takes its ids node and owner znodes with it, and
the next session registers again before it rebalances (0.8.2's handleNewSession, legacy-zk-protocol.md §3.5).
Rebalances are not states here: they run under their own lock between registrations, and an attempt
retries through connection losses. :class:`Lifecycle` also keeps kazoo's connection state, which decides
what a reconnection means.

Only the member's hub thread changes the state. The consumer's caller-side mark that public methods refuse
after ``close()`` is not part of it: another thread writes that one.

The table is data so that tests read what the member enforces.
Pure: imports nothing but the standard library and zkcoord.errors.
"""

import enum

from zkcoord.errors import ZkcoordError


class MemberState(enum.Enum):
    NEW = "NEW"  # constructed; start() not called
    STARTING = "STARTING"  # connecting, checking the group, registering for the first time
    REGISTERED = "REGISTERED"  # our ids node exists in the current session; rebalances run
    SESSION_LOST = "SESSION_LOST"  # the session expired, and our ids and owner znodes with it
    NEW_SESSION = "NEW_SESSION"  # a new session owes a re-registration; work begun in an older one gives way
    REGISTERING = "REGISTERING"  # handleNewSession is registering in the new session
    CLOSING = "CLOSING"  # close() began: nothing new starts, and what runs gives up
    CLOSED = "CLOSED"  # the session is closed


class AfterConnect(enum.Enum):
    """What a connection that came back asks of the member."""

    NEW_SESSION = "NEW_SESSION"  # handleNewSession: re-register, then rebalance
    RECONNECTED = "RECONNECTED"  # the same session: watch events of the gap are lost; re-arm, rebalance once


# kazoo's connection states (``kazoo.protocol.states.KazooState``), as its session listeners receive them.
CONNECTED, SUSPENDED, LOST = "CONNECTED", "SUSPENDED", "LOST"

S = MemberState
VALID_PREVIOUS_STATES: dict[MemberState, frozenset[MemberState]] = {
    S.NEW: frozenset(),
    S.STARTING: frozenset({S.NEW}),
    S.REGISTERED: frozenset({S.STARTING, S.REGISTERING}),
    # From NEW_SESSION: lost again before the owed re-registration began, which then begins disconnected.
    S.SESSION_LOST: frozenset({S.STARTING, S.REGISTERED, S.REGISTERING, S.NEW_SESSION}),
    # From NEW_SESSION: lost and connected again before the owed re-registration began.
    S.NEW_SESSION: frozenset({S.SESSION_LOST, S.NEW_SESSION}),
    S.REGISTERING: frozenset({S.NEW_SESSION}),
    S.CLOSING: frozenset({S.STARTING, S.REGISTERED, S.SESSION_LOST, S.NEW_SESSION, S.REGISTERING}),
    S.CLOSED: frozenset({S.CLOSING}),
}


class IllegalMemberTransition(ZkcoordError):
    """A transition the lifecycle table does not allow: a bug of the member, never input."""


def check_transition(current: MemberState, target: MemberState) -> None:
    """Raise :class:`IllegalMemberTransition` unless ``current`` → ``target`` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalMemberTransition(f"legacy member state {current.name} -> {target.name} is not a valid transition")


class Lifecycle:
    """The member's current state, changed only through the table by the events below, and kazoo's."""

    def __init__(self) -> None:
        self.state = S.NEW
        self.connection: str | None = None  # the last kazoo state; None before the first

    def _enter(self, target: MemberState) -> None:
        check_transition(self.state, target)
        self.state = target

    @property
    def connected(self) -> bool:
        return self.connection == CONNECTED

    @property
    def registered(self) -> bool:
        """Our ids node exists in the current session."""
        return self.state is S.REGISTERED

    @property
    def superseded(self) -> bool:
        """A newer session awaits its re-registration: a rebalance or fetch of an older one gives way."""
        return self.state is S.NEW_SESSION

    @property
    def closing(self) -> bool:
        return self.state in (S.CLOSING, S.CLOSED)

    def start(self) -> None:
        self._enter(S.STARTING)

    def registration_written(self) -> None:
        """Our ids node was written. A session lost meanwhile, or a close, keeps its state: the node belongs to
        a session that owes its own re-registration, or to a member that is going away."""
        if self.state in (S.STARTING, S.REGISTERING):
            self._enter(S.REGISTERED)

    def connection_changed(self, state: str) -> AfterConnect | None:
        """kazoo's connection state changed to ``state``; what the member must do about it, if anything.

        LOST: the session expired. A member that already owes a new session its re-registration still does.
        kazoo follows a LOST with CONNECTED only, in a new session; a CONNECTED after SUSPENDED is the same one.
        """
        previous, self.connection = self.connection, state
        if state == LOST and self.state in (S.STARTING, S.REGISTERED, S.REGISTERING):
            self._enter(S.SESSION_LOST)
        if state != CONNECTED or self.closing:
            return None
        if previous == LOST:
            self._enter(S.NEW_SESSION)  # a rebalance still retrying on the old session gives way
            return AfterConnect.NEW_SESSION
        if previous == SUSPENDED:
            return AfterConnect.RECONNECTED
        return None

    def reregistration_began(self) -> None:
        """handleNewSession took over the owed re-registration, in a session lost meanwhile if the connection
        is down (the next one will owe its own). When a second one, queued before the first began, runs
        after it, nothing is owed any more; and a close wins."""
        if self.state is S.NEW_SESSION:
            self._enter(S.SESSION_LOST if self.connection == LOST else S.REGISTERING)

    def close(self) -> None:
        self._enter(S.CLOSING)

    def closed(self) -> None:
        self._enter(S.CLOSED)
