"""The member's link to its group coordinator: finding it, heartbeating to it, and giving it up.

:class:`CoordinatorLink` owns the :class:`~zkcoord.membership.states.CoordinatorState` machine: FindCoordinator
until a node names the coordinator, then, while the member holds a generation, a Heartbeat every
heartbeat.interval.ms, and when the coordinator last confirmed the member's session. Kafka's session timer decides
when an unanswering coordinator is given up (and found again). What a heartbeat's answer (or its absence for a
whole session) means for the membership is the member's to decide; the link only keeps the timers and the
coordinator.

Pure: no IO. Imports only zkcoord.errors, zkcoord.membership.effects and .states; must not import
zkcoord.membership.member (it imports this module).
"""

import logging
from collections.abc import Callable

from zkcoord.errors import ErrorCode
from zkcoord.membership.effects import (
    ANY_NODE,
    COORDINATOR,
    COORDINATOR_GONE,
    MembershipConfig,
    Outbox,
    Send,
    error_code,
)
from zkcoord.membership.states import CoordinatorState
from zkcoord.wire.messages import Response

log = logging.getLogger(__name__)

E = ErrorCode


class CoordinatorLink:
    """Where the group coordinator is and whether it still answers; see the module docstring.

    ``tag`` makes the tag of each request (the member's, so that tags carry its generation).
    """

    def __init__(self, config: MembershipConfig, outbox: Outbox, tag: Callable[[str], tuple], now_ms: int):
        self._config = config
        self._outbox = outbox
        self._tag = tag
        self.state = CoordinatorState.INITIALIZED if config.group_id else CoordinatorState.DOWN
        self.coordinator: tuple[int, str, int] | None = None  # node id, host, port
        # When the last request the coordinator answered for this generation was sent: the coordinator heard the
        # member no earlier, so the member's session there lasts at least until this + session.timeout.ms.
        self.last_heartbeat_ms = now_ms
        self._find_tag: tuple | None = None
        self._heartbeat_tag: tuple | None = None
        self._heartbeat_sent_ms = now_ms
        self._next_heartbeat_ms: int | None = None  # None: no generation to heartbeat for
        self._session_timer_ms = now_ms  # Kafka's Heartbeat.sessionTimer: restarted by an answer or a new coordinator

    @property
    def needs_discovery(self) -> bool:
        return self.state != CoordinatorState.DOWN and self.coordinator is None

    def lost(self, now_ms: int, reason: str) -> None:
        """Forget the coordinator: the connection died, it stopped answering, or it is no longer the one."""
        if self.coordinator is not None:
            log.info("group=%s coordinator %s unknown: %s", self._config.group_id, self.coordinator, reason)
        self.coordinator = None
        if self.state != CoordinatorState.DOWN:
            self.state = CoordinatorState.INITIALIZED

    @property
    def session_deadline_ms(self) -> int | None:
        """From when the coordinator may have expired the member, unless it confirms it; None without heartbeats."""
        if self._next_heartbeat_ms is None:
            return None
        return self.last_heartbeat_ms + self._config.session_timeout_ms

    def confirmed(self, sent_ms: int) -> None:
        """The coordinator accepted a request of this generation sent at ``sent_ms`` (a commit): it renewed the
        member's session no earlier."""
        self.last_heartbeat_ms = max(self.last_heartbeat_ms, sent_ms)

    def deadlines(self) -> list[int]:
        """When the coordinator is given up and the next heartbeat is due, while the member heartbeats."""
        if self._next_heartbeat_ms is None or self.coordinator is None:
            return []
        deadlines = [self._session_timer_ms + self._config.session_timeout_ms + 1, self.session_deadline_ms]
        if self._heartbeat_tag is None:
            deadlines.append(self._heartbeat_due_ms())
        return deadlines

    def _heartbeat_due_ms(self) -> int:
        """The next heartbeat's time; in doubt (past the session by the member's clock) only the coordinator's next
        answer settles the member's fate, so it asks again after retry.backoff.ms rather than heartbeat.interval.ms."""
        in_doubt = max(self._heartbeat_sent_ms + self._config.retry_backoff_ms, self.session_deadline_ms)
        return min(self._next_heartbeat_ms, in_doubt)

    # ---- discovery -------------------------------------------------------------------------------------------

    def find(self) -> None:
        """Ask any node which node coordinates the group, unless that question is already out."""
        if self._find_tag is not None:
            return
        self.state = CoordinatorState.COORDINATOR_DISCOVERY
        self._find_tag = self._tag("find")
        fields = {"key": self._config.group_id, "key_type": 0}
        self._outbox.send(Send(ANY_NODE, "FindCoordinator", fields, self._find_tag, self._config.request_timeout_ms))

    def on_find(self, tag: tuple, response: Response | None, now_ms: int) -> bool:
        """Take FindCoordinator's answer; True when it failed, so that the member backs off before asking again."""
        if tag != self._find_tag:
            return False
        self._find_tag = None
        if error_code(response) != E.NONE:
            return True
        self.coordinator = (response.node_id, response.host, response.port)
        self.state = CoordinatorState.STABLE
        # Kafka's heartbeat.resetSessionTimeout(): a coordinator found after a long failover gets a whole
        # session to answer a heartbeat before it is given up as unreachable.
        self._session_timer_ms = now_ms
        return False

    # ---- heartbeats ------------------------------------------------------------------------------------------

    def start_heartbeats(self, now_ms: int, sync_sent_ms: int) -> None:
        """The member synced a generation with a SyncGroup sent at ``sync_sent_ms``: heartbeat from now on."""
        self.last_heartbeat_ms = sync_sent_ms
        self._session_timer_ms = now_ms
        self._next_heartbeat_ms = now_ms + self._config.heartbeat_interval_ms

    def stop_heartbeats(self) -> None:
        """The member has no generation any more; an answer still on its way is ignored."""
        self._heartbeat_tag = None
        self._next_heartbeat_ms = None

    def heartbeat(self, now_ms: int, identity: Callable[[], dict]) -> None:
        """Send a Heartbeat (``identity()``'s fields) when one is due; give the coordinator up after a session
        without an answer."""
        if self._next_heartbeat_ms is None:
            return
        if now_ms - self._session_timer_ms > self._config.session_timeout_ms:
            # Kafka's heartbeat thread: no answer for a whole session means the coordinator is unreachable, also
            # with a heartbeat in flight (a paused or partitioned coordinator never answers it; a late answer is
            # stale).
            self._session_timer_ms = now_ms
            self._heartbeat_tag = None
            self.lost(now_ms, "no heartbeat answer within session.timeout.ms")
            self.find()  # now: nothing else may wake the member before its next deadline
            return
        if self._heartbeat_tag is not None or now_ms < self._heartbeat_due_ms():
            return
        self._heartbeat_tag = self._tag("heartbeat")
        self._heartbeat_sent_ms = now_ms
        timeout = self._config.request_timeout_ms
        self._outbox.send(Send(COORDINATOR, "Heartbeat", identity(), self._heartbeat_tag, timeout))

    def heartbeat_answered(self, tag: tuple) -> bool:
        """Whether ``tag`` is the heartbeat in flight (any other answer is stale); it is no longer in flight."""
        if tag != self._heartbeat_tag:
            return False
        self._heartbeat_tag = None
        return True

    def heartbeat_done(self, response: Response | None, now_ms: int, probing: bool) -> int | None:
        """Schedule the next heartbeat after this answer to the member's current generation; the error code.

        A coordinator still loading the group answers every Heartbeat 0 unchecked (Kafka's "respond blindly"), so
        a 0 to a heartbeat sent in doubt confirms nothing while the member is ``probing`` (it has the generation
        checked by a commit instead). REBALANCE_IN_PROGRESS is only answered after the generation check.
        """
        code = error_code(response)
        self._next_heartbeat_ms = now_ms + self._config.heartbeat_interval_ms
        if code in (E.NONE, E.REBALANCE_IN_PROGRESS):
            sent_in_doubt = self._heartbeat_sent_ms >= self.session_deadline_ms
            if code == E.REBALANCE_IN_PROGRESS or not (probing and sent_in_doubt):
                self.confirmed(self._heartbeat_sent_ms)
            self._session_timer_ms = now_ms
        elif code is None or code in COORDINATOR_GONE:
            self.lost(now_ms, "heartbeat failed")
            self._next_heartbeat_ms = now_ms + self._config.retry_backoff_ms
        return code
