"""Log-start and log-end offsets from the brokers registered in ZooKeeper (``/brokers/ids/<id>`` under the chroot
of the legacy groups), over Kafka's protocol: what ``groups describe`` and ``zkcoord lag`` read without
``--source``.

IO: ZooKeeper (the admin client's) and kafka-python (:class:`zkcoord.sources.kafka.KafkaSource`, ListOffsets).
Must not import the CLI, the renderer, the server or gevent.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence

from kazoo.client import KazooClient

from zkcoord.errors import SourceError, UnknownPartitionError
from zkcoord.model import TopicPartition
from zkcoord.sources.base import RecordSource
from zkcoord.zk import admin as zk_admin
from zkcoord.zk import layout

log = logging.getLogger(__name__)

# Long enough for a broker on a loaded machine, short enough that a dead one does not hold a command for long.
BROKER_TIMEOUT_MS = 10_000


class BrokerOffsets:
    """The brokers registered under ``/brokers/ids`` of ``zookeeper()`` (in its chroot), asked through one
    KafkaSource opened on first use. When none is registered or none answers, the offsets are unknown (None),
    ``problem`` says why, and ``warn`` is told once."""

    def __init__(
        self,
        zookeeper: Callable[[], KazooClient],
        request_timeout_ms: int = BROKER_TIMEOUT_MS,
        warn: Callable[[str], None] | None = None,
    ):
        self._zookeeper = zookeeper
        self._warn = warn or log.warning
        self._request_timeout_ms = request_timeout_ms
        self._source: RecordSource | None = None
        self.problem: str | None = None

    def beginning_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        return self._list(partitions, earliest=True)

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        return self._list(partitions, earliest=False)

    def retry(self) -> None:
        """Forget the last problem: the next call reads the registrations and asks the brokers again."""
        self.problem = None

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None

    def _list(self, partitions: Sequence[TopicPartition], earliest: bool) -> dict[TopicPartition, int] | None:
        source = self._opened()
        if source is None:
            return None
        ask = source.beginning_offsets if earliest else source.end_offsets
        try:
            try:
                return dict(ask(partitions))
            except UnknownPartitionError:  # a partition ZooKeeper's offsets name that the brokers do not have
                return {tp: offset for tp in partitions for offset in _known(ask, tp)}
        except SourceError as error:
            self._fail(f"the brokers registered under {layout.BROKER_IDS_PATH} do not answer: {error}")
            return None

    def _opened(self) -> RecordSource | None:
        if self._source is not None or self.problem is not None:
            return self._source
        registered = [b for b in zk_admin.read_brokers(self._zookeeper()) if b.host is not None]
        if not registered:
            self._fail(f"no broker is registered under {layout.BROKER_IDS_PATH}")
            return None
        if (refusal := self._none_accepts(registered)) is not None:
            self._fail(f"no broker registered under {layout.BROKER_IDS_PATH} answers: {refusal}")
            return None
        from zkcoord.sources.kafka import KafkaSource

        try:
            self._source = KafkaSource(
                ",".join(b.connection_string for b in registered),
                client_id="zkcoord-admin",
                request_timeout_ms=self._request_timeout_ms,
                bootstrap_timeout_ms=self._request_timeout_ms,
                allow_auto_create_topics=False,  # a topic only ZooKeeper's offsets name must not appear by reading
            )
        except SourceError as error:
            self._fail(f"no broker registered under {layout.BROKER_IDS_PATH} answers: {error}")
        return self._source

    def _none_accepts(self, brokers: list[layout.BrokerRegistration]) -> str | None:
        """Why no broker accepts a connection (None when one does): kafka-python would retry a refused
        connection until its bootstrap timeout, and a registration left by a dead broker is common."""
        refusals = []
        for broker in brokers:
            try:
                socket.create_connection((broker.host, broker.port), self._request_timeout_ms / 1000).close()
                return None
            except OSError as error:
                refusals.append(f"{broker.connection_string}: {error.strerror or error}")
        return "; ".join(refusals)

    def _fail(self, problem: str) -> None:
        self.problem = problem
        self.close()
        self._warn(f"{problem}; LOG-END-OFFSET and LAG are unknown (give --source to read them elsewhere)")


def _known(ask, tp: TopicPartition) -> list[int]:
    try:
        return list(ask([tp]).values())
    except UnknownPartitionError:
        return []
