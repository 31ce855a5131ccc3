"""A member's session in doubt, and the OffsetCommit probe that has its generation checked.

A member whose coordinator has confirmed nothing sent in the last session.timeout.ms (the member was paused, cut
off, or the coordinator fails over) may have been expired there: its session is in doubt until the coordinator
confirms the generation or ends it. A coordinator still loading the group answers Heartbeat 0 without checking it,
so in doubt :class:`SessionDoubt` has the generation checked by an OffsetCommit that writes again, unchanged, the
offsets the group holds for the member's partitions (the probe). What the answer means for the membership is the
member's to decide.

Pure: no IO. Imports zkcoord.errors and zkcoord.membership's coordinator, effects and requests; must not import
zkcoord.membership.member (it imports this module).
"""

import logging
from collections.abc import Callable, Collection

from zkcoord.errors import ErrorCode
from zkcoord.membership.coordinator import CoordinatorLink
from zkcoord.membership.effects import COORDINATOR, MembershipConfig, Outbox, Send
from zkcoord.membership.requests import ApplicationRequests, commit_answer_code, commit_topics
from zkcoord.model import TopicPartition
from zkcoord.wire.messages import Response

log = logging.getLogger(__name__)

E = ErrorCode


class SessionDoubt:
    """Whether the member's session is in doubt, its warning, and the probe; see the module docstring.

    ``tag`` makes the tag of each request (the member's, so that tags carry its generation).
    """

    def __init__(
        self,
        config: MembershipConfig,
        outbox: Outbox,
        tag: Callable[[str], tuple],
        link: CoordinatorLink,
        requests: ApplicationRequests,
        now_ms: int,
    ):
        self._config = config
        self._outbox = outbox
        self._tag = tag
        self._link = link
        self._requests = requests
        self._reported_deadline_ms: int | None = None  # the session deadline whose passing was logged
        self._probe_tag: tuple | None = None  # the OffsetCommit in flight that has the generation checked in doubt
        self._probe_sent_ms = now_ms

    def in_doubt(self, now_ms: int, heartbeating: bool) -> bool:
        """Whether a member that holds a generation (``heartbeating``) had nothing confirmed for a session."""
        deadline = self._link.session_deadline_ms
        return deadline is not None and heartbeating and now_ms >= deadline

    def report(self, in_doubt: bool, member_id: str, generation: int) -> None:
        """Log once that the session is in doubt; the next answer from the coordinator settles it."""
        deadline = self._link.session_deadline_ms
        if not in_doubt or deadline == self._reported_deadline_ms:
            return
        self._reported_deadline_ms = deadline
        log.warning(
            "group=%s member=%s: nothing confirmed by the coordinator within session.timeout.ms=%d; its partitions "
            "are held unread until the coordinator confirms generation %d or ends it",
            self._config.group_id,
            member_id,
            self._config.session_timeout_ms,
            generation,
        )

    def deadlines(self, in_doubt: bool) -> list[int]:
        """When the next probe is due, while in doubt with none in flight."""
        if in_doubt and self._probe_tag is None:
            return [self._probe_sent_ms + self._config.retry_backoff_ms]
        return []

    def probing(self, owned: Collection[TopicPartition]) -> bool:
        """Whether in doubt the generation is checked by a probe: the group holds an offset of ``owned``."""
        return bool(self._probe_offsets(owned))

    def _probe_offsets(self, owned: Collection[TopicPartition]) -> dict[TopicPartition, tuple[int, str | None]]:
        """What the probe commits: the offsets the group holds for the member's partitions, as they are."""
        committed = self._requests.committed
        return {tp: committed[tp] for tp in owned if tp in committed}

    def probe(self, now_ms: int, in_doubt: bool, owned: Collection[TopicPartition], identity: Callable[[], dict]):
        """In doubt, every retry.backoff.ms: an OffsetCommit the coordinator checks against the member's generation
        (an empty one is answered unchecked). None while a commit of the poll side is out: that one checks it, and
        the probe must not overwrite what it commits. Without any known offset, heartbeats alone decide."""
        if self._probe_tag is not None or not in_doubt or self._requests.commit_in_flight:
            return
        offsets = self._probe_offsets(owned)
        if not offsets or now_ms < self._probe_sent_ms + self._config.retry_backoff_ms:
            return
        fields = {**identity(), "topics": commit_topics(offsets)}
        self._probe_tag = self._tag("probe")
        self._probe_sent_ms = now_ms
        self._outbox.send(Send(COORDINATOR, "OffsetCommit", fields, self._probe_tag, self._config.request_timeout_ms))

    def forget(self) -> None:
        """Ignore the probe in flight (its generation or coordinator is gone); the next one is asked anew."""
        self._probe_tag = None

    def probe_answered(self, tag: tuple) -> bool:
        """Whether ``tag`` is the probe in flight (any other answer is stale); it is no longer in flight."""
        if tag != self._probe_tag:
            return False
        self._probe_tag = None
        return True

    def probe_done(self, response: Response | None) -> int | None:
        """The error code of the probe's answer to the member's current generation (None: no answer); a checked
        0 or REBALANCE_IN_PROGRESS confirms the session, which ends the doubt with no rebalance."""
        code = None if response is None else commit_answer_code(response)
        if code in (E.NONE, E.REBALANCE_IN_PROGRESS):
            self._link.confirmed(self._probe_sent_ms)
        return code
