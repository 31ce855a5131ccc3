"""The poll side's own requests through the member: OffsetCommit, OffsetFetch and Metadata, from queued to answered.

:class:`ApplicationRequests` keeps each request until it may be sent (its node known, no rebalance in the way
of a commit), retries it after a backoff when its node failed or the coordinator moved, times it out at its
deadline and answers it with a :class:`~zkcoord.membership.effects.Completed` event. What an answer means for the
membership (a coordinator to find again, a fenced instance) comes back to the member as an :class:`Answer`. From
the answers it also learns the offsets the group holds for partitions (:attr:`ApplicationRequests.committed`):
what the member can commit again, unchanged, to have its generation checked while its session is in doubt.
Also here: the request fields the consumer builds (:func:`commit_topics`, :func:`partitions_by_topic`), the
answers it reads, and the exception a failed commit raises.

Pure: no IO. Imports only zkcoord.errors, zkcoord.model, zkcoord.membership.effects and .states; must not import
zkcoord.membership.member (it imports this module).
"""

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from zkcoord.errors import (
    CommitFailedError,
    ErrorCode,
    RebalanceInProgressError,
    ZkcoordError,
    error_for,
)
from zkcoord.membership.effects import (
    ANY_NODE,
    COORDINATOR,
    COORDINATOR_GONE,
    Completed,
    MembershipConfig,
    Outbox,
    Send,
    error_code,
)
from zkcoord.membership.states import CoordinatorState
from zkcoord.model import TopicPartition
from zkcoord.wire.messages import MetadataResponse, OffsetCommitResponse, OffsetFetchResponse, Response

E = ErrorCode


@dataclass
class ApplicationRequest:
    """One request of the poll side: ``api`` with ``fields``, answered by ``deadline_ms`` at the latest."""

    request_id: int
    api: str
    fields: dict
    deadline_ms: int
    sent: bool = False
    sent_ms: int = 0
    not_before_ms: int = 0


@dataclass(frozen=True)
class Answer:
    """What an answer means for the member beyond the request it completes."""

    coordinator_lost: str | None = None  # why the coordinator must be found again
    fenced: str | None = None  # the coordinator's message: this static instance is fenced, the member fails
    partition_counts: Mapping[str, int] | None = None  # learnt from a Metadata answer
    confirmed_sent_ms: int | None = None  # a commit the coordinator took, sent then: the member's session is alive


class ApplicationRequests:
    """The poll side's requests in flight or waiting; see the module docstring.

    ``tag`` makes the tag of each request (the member's, so that tags carry its generation).
    """

    def __init__(self, config: MembershipConfig, outbox: Outbox, tag: Callable[..., tuple]):
        self._config = config
        self._outbox = outbox
        self._tag = tag
        self._requests: dict[int, ApplicationRequest] = {}
        self._by_tag: dict[tuple, int] = {}
        # Partition -> (offset, metadata) the group holds, as fetched or as committed and taken; a commit whose
        # outcome is unknown (no answer) makes its partitions unknown.
        self.committed: dict[TopicPartition, tuple[int, str | None]] = {}

    @property
    def commit_in_flight(self) -> bool:
        return any(request.sent and request.api == "OffsetCommit" for request in self._requests.values())

    def keep_committed(self, partitions: Collection[TopicPartition]) -> None:
        """Forget the offsets of every other partition: once another member may own one, it may commit it."""
        self.committed = {tp: value for tp, value in self.committed.items() if tp in partitions}

    def add(self, request_id: int, api: str, fields: dict, deadline_ms: int) -> None:
        self._requests[request_id] = ApplicationRequest(request_id, api, fields, deadline_ms)

    def deadlines(self) -> Iterator[int]:
        """Every time at which a request may time out or end its backoff."""
        for request in self._requests.values():
            yield request.deadline_ms
            yield request.not_before_ms

    def send_due(self, now_ms: int, coordinator: CoordinatorState, commit_identity: dict, rebalancing: bool) -> None:
        """Send every request that may go now, in the order they came, and fail those that cannot go at all.

        Metadata goes to any node, the rest to the coordinator once it is known (``coordinator`` DOWN: there is
        no group, so they fail). A commit carries ``commit_identity`` and fails while the member is
        ``rebalancing``. A request past its deadline fails as timed out.
        """
        for request in list(self._requests.values()):
            if request.sent:
                continue
            if now_ms >= request.deadline_ms:
                error = error_for(E.REQUEST_TIMED_OUT, f"{request.api} not answered in time")
                self._complete(request.request_id, error=error)
                continue
            if now_ms < request.not_before_ms:
                continue
            if request.api == "Metadata":
                self._send(request, ANY_NODE, dict(request.fields), now_ms)
            elif coordinator == CoordinatorState.DOWN:
                self._complete(request.request_id, error=ZkcoordError(f"{request.api} needs a group.id"))
            elif coordinator != CoordinatorState.STABLE:
                continue  # sent once the coordinator is found
            elif request.api != "OffsetCommit":
                self._send(request, COORDINATOR, dict(request.fields), now_ms)
            elif rebalancing:
                # Kafka's generationIfStable(): sent now, the commit would queue behind the parked JoinGroup (or
                # the SyncGroup) on the coordinator connection for the whole rebalance, then fail with the
                # generation it carried although a cooperative member still owns its partitions.
                error = RebalanceInProgressError(
                    "commit not sent: the group is being rebalanced; commit again once poll() completed it"
                )
                self._complete(request.request_id, error=error)
            else:
                self._send(request, COORDINATOR, {**request.fields, **commit_identity}, now_ms)

    def _send(self, request: ApplicationRequest, target: str, fields: dict, now_ms: int) -> None:
        tag = self._tag("app", request.request_id)
        self._by_tag[tag] = request.request_id
        request.sent = True
        request.sent_ms = now_ms
        self._outbox.send(Send(target, request.api, fields, tag, request.deadline_ms - now_ms))

    def _complete(self, request_id: int, value: Any = None, error: ZkcoordError | None = None) -> None:
        if self._requests.pop(request_id, None) is not None:
            self._outbox.emit(Completed(request_id, value, error))

    def fail_all(self, error: ZkcoordError) -> None:
        for request_id in list(self._requests):
            self._complete(request_id, error=error)

    def on_response(self, tag: tuple, response: Response | None, now_ms: int) -> Answer:
        """The answer to the request sent with ``tag``; ``None`` when its node failed or did not answer in time."""
        request = self._requests.get(self._by_tag.pop(tag, None))
        if request is None:
            return Answer()
        request.sent = False
        retry_ms = now_ms + self._config.retry_backoff_ms
        if request.api == "OffsetCommit":
            self._learn_commit(request.fields, response)
        if response is None:
            request.not_before_ms = retry_ms
            return Answer(coordinator_lost=f"{request.api} failed" if request.api != "Metadata" else None)
        code = commit_answer_code(response) if type(response) is OffsetCommitResponse else error_code(response)
        if code in COORDINATOR_GONE or code == E.COORDINATOR_LOAD_IN_PROGRESS:
            request.not_before_ms = retry_ms
            return Answer(coordinator_lost=f"{request.api}: {E(code).name}" if code in COORDINATOR_GONE else None)
        if code != E.NONE:
            message = getattr(response, "error_message", None) or ""
            if code == E.FENCED_INSTANCE_ID:
                return Answer(fenced=message)  # failing, the member completes every request
            error = commit_error(code, message) if request.api == "OffsetCommit" else error_for(code, message)
            self._complete(request.request_id, error=error)
            return Answer()
        if request.api == "OffsetFetch":
            fetched = _fetched_offsets(response)
            for tp, value in fetched.items():
                self._learn(tp, value)
            self._complete(request.request_id, value=fetched)
        elif request.api == "Metadata":
            counts = topic_partition_counts(response)
            self._complete(request.request_id, value=counts)
            return Answer(partition_counts=counts)
        else:
            self._complete(request.request_id)
            if request.api == "OffsetCommit" and any(topic.partitions for topic in response.topics):
                # A commit of no partition is answered without any check (Kafka's API layer too): it proves nothing.
                return Answer(confirmed_sent_ms=request.sent_ms)
        return Answer()

    def _learn_commit(self, fields: dict, response: Response | None) -> None:
        """The partitions the coordinator took (answered 0) hold the offsets sent; after no answer, none is known."""
        sent = committed_offsets(fields)
        if type(response) is not OffsetCommitResponse:
            for tp in sent:
                self._learn(tp, None)
            return
        for topic in response.topics:
            for partition in topic.partitions:
                tp = TopicPartition(topic.name, partition.partition_index)
                if partition.error_code == E.NONE and tp in sent:
                    self._learn(tp, sent[tp])

    def _learn(self, tp: TopicPartition, value: tuple[int, str | None] | None) -> None:
        if value is None:
            self.committed.pop(tp, None)
        else:
            self.committed[tp] = value


def partitions_by_topic(partitions: Collection[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers by topic, sorted: how OffsetFetch names the partitions it asks for."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        grouped.setdefault(topic, []).append(partition)
    return grouped


def commit_topics(offsets: Mapping[TopicPartition, tuple[int, str | None]]) -> list[dict]:
    """OffsetCommit's ``topics`` for ``offsets`` (partition -> (offset, metadata))."""
    grouped: dict[str, list[dict]] = {}
    for (topic, partition), (offset, metadata) in sorted(offsets.items()):
        grouped.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
        )
    return [{"name": topic, "partitions": partitions} for topic, partitions in grouped.items()]


def committed_offsets(fields: dict) -> dict[TopicPartition, tuple[int, str | None]]:
    """The offsets in OffsetCommit's ``fields`` (the reverse of :func:`commit_topics`)."""
    return {
        TopicPartition(topic["name"], partition["partition_index"]): (
            partition["committed_offset"],
            partition.get("committed_metadata"),
        )
        for topic in fields.get("topics", ())
        for partition in topic["partitions"]
    }


def commit_answer_code(response: OffsetCommitResponse) -> int:
    """OffsetCommit's answer has only per-partition codes: the first that is not 0, else 0."""
    codes = (p.error_code for t in response.topics for p in t.partitions)
    return next((code for code in codes if code != E.NONE), E.NONE)


def commit_error(code: int, message: str = "") -> ZkcoordError:
    """The exception a failed commit raises (kafka-python's names where it has them)."""
    if code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS):
        return CommitFailedError(
            f"commit cannot be completed since the group has already rebalanced ({E(code).name}); "
            "the partitions may now belong to another member"
        )
    return error_for(code, message)


def topic_partition_counts(response: MetadataResponse) -> dict[str, int]:
    """A Metadata answer's partition count of every topic it found."""
    return {
        topic.name: len(topic.partitions)
        for topic in response.topics
        if topic.error_code == E.NONE and topic.partitions
    }


def _fetched_offsets(response: OffsetFetchResponse) -> dict[TopicPartition, tuple[int, str | None] | None]:
    """An OffsetFetch answer: (offset, metadata) of each partition, None where the group committed none."""
    return {
        TopicPartition(t.name, p.partition_index): None if p.committed_offset < 0 else (p.committed_offset, p.metadata)
        for t in response.topics
        for p in t.partitions
    }
