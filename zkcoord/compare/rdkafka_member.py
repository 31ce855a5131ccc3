"""A librdkafka consumer (confluent-kafka) as a comparison member, run by zkcoord.compare.member.

The same consumer serves both of Kafka's-protocol targets: the broker's own group coordinator and zkcoord's
coordinator through its Kafka listener; only ``bootstrap.servers`` differs. librdkafka's rebalance callbacks
become the ``compare.*`` events zkcoord's members write (docs/traces.md): ``on_assign`` adds partitions and
reports the rebalance of its generation, ``on_revoke`` and ``on_lost`` remove partitions (under
cooperative-sticky and KIP-848's consumer protocol each names only the partitions that move), ``on_commit``
reports each commit. Under the consumer protocol the generation is the member's epoch, which moves on without a
callback when the member's partitions stay: it is read after every ``consume()`` too. Offsets are
stored after a record is processed, so an auto-commit never covers a record before its work is done.
"""

import logging
import struct
import threading
import time

from zkcoord.compare.member_trace import CompareTrace, now_ms
from zkcoord.compare.scenarios import CLASSIC_PROTOCOL, CONSUMER_PROTOCOL
from zkcoord.model import Address

log = logging.getLogger(__name__)

BATCH_RECORDS = 500
CONSUME_TIMEOUT_S = 0.1  # how long a consume() waits for records: the stop flag is looked at in between
# librdkafka tells an application its generation only inside the group metadata it serialises for
# transactional producers (rd_kafka_consumer_group_metadata_write): this magic, then the generation as a
# native-endian int32.
GROUP_METADATA_MAGIC = b"CGMDv2:"


def rdkafka_member_config(
    group: str,
    bootstrap: list[Address],
    member: str,
    strategy: str,
    static: bool,
    session_timeout_ms: int,
    heartbeat_interval_ms: int,
    auto_commit_interval_ms: int,
    group_protocol: str = CLASSIC_PROTOCOL,
) -> dict:
    """A librdkafka consumer's properties: auto-commit of processed records only, from the log's beginning.

    Under KIP-848's consumer protocol the broker assigns and times the session: librdkafka refuses a
    ``partition.assignment.strategy``, ``session.timeout.ms`` or ``heartbeat.interval.ms`` there, so ``strategy``
    and the timings are the classic protocol's only (the broker of the run has them).
    """
    config = {
        "bootstrap.servers": ",".join(f"{host}:{port}" for host, port in bootstrap),
        "group.id": group,
        "client.id": member,
        "group.protocol": group_protocol,
        "enable.auto.commit": True,
        "auto.commit.interval.ms": auto_commit_interval_ms,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": heartbeat_interval_ms,  # a partition-count change is seen as fast
    }
    if group_protocol == CLASSIC_PROTOCOL:
        config.update(
            {
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": session_timeout_ms,
                "heartbeat.interval.ms": heartbeat_interval_ms,
            }
        )
    if static:
        config["group.instance.id"] = member
    return config


def generation_of(group_metadata: bytes) -> int:
    """The generation in librdkafka's serialised consumer group metadata."""
    if not group_metadata.startswith(GROUP_METADATA_MAGIC):
        raise ValueError(f"not librdkafka's consumer group metadata: {group_metadata[:16]!r}")
    return struct.unpack_from("=i", group_metadata, len(GROUP_METADATA_MAGIC))[0]


class RdkafkaMember:
    """A librdkafka consumer in a poll loop: each batch processed partition by partition, then its offsets stored.

    librdkafka runs the rebalance and commit callbacks inside ``consume()`` and ``close()``, on the poll thread,
    so a revocation is reported only after the records handed out before it were processed.
    """

    def __init__(self, spec: dict, trace: CompareTrace, stop: threading.Event):
        from confluent_kafka import Consumer

        self.trace = trace
        self.cost_s = spec["cost_ms"] / 1000
        self.stop = stop
        self.failed = False
        self._owned: set[tuple[str, int]] = set()
        self._generations: set[int] = set()
        # KIP-848: a member whose partitions stay gets no callback when the group's epoch moves on, only the new
        # epoch in its next heartbeat's answer, so the epoch is read after every consume().
        self._follows_epoch = spec["config"].get("group.protocol") == CONSUMER_PROTOCOL
        self.consumer = Consumer({**spec["config"], "on_commit": self._on_commit, "error_cb": self._on_error})
        self.consumer.subscribe(
            spec["topics"], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self._process(self.consumer.consume(BATCH_RECORDS, CONSUME_TIMEOUT_S))
                if self._follows_epoch:
                    self._follow_epoch()
        except Exception:
            log.exception("the member failed")
            self.failed = True
            self.stop.set()

    def _process(self, messages: list) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        by_partition: dict[tuple[str, int], list[int]] = {}
        for message in messages:
            if message.error() is not None:
                self._on_error(message.error())
                continue
            by_partition.setdefault((message.topic(), message.partition()), []).append(message.offset())
        for (topic, partition), offsets in by_partition.items():
            if self.cost_s:
                time.sleep(self.cost_s * len(offsets))
            self.trace.processed(topic, partition, offsets[0], offsets[-1], now_ms())
            try:
                self.consumer.store_offsets(offsets=[TopicPartition(topic, partition, offsets[-1] + 1)])
            except KafkaException as error:  # no longer assigned: its next owner reads it again
                log.warning("storing %s-%d's offset failed: %s", topic, partition, error)

    # -- librdkafka's callbacks, on the poll thread --

    def _on_assign(self, consumer, partitions: list) -> None:
        generation = generation_of(consumer.consumer_group_metadata())
        self._rebalanced("assign", partitions, generation)
        self._change_ownership(self._owned | _pairs(partitions))
        self._rebalanced_in(generation)

    def _follow_epoch(self) -> None:
        epoch = generation_of(self.consumer.consumer_group_metadata())
        if epoch > 0:  # 0 before the first heartbeat's answer, negative once leaving
            self._rebalanced_in(epoch)

    def _rebalanced_in(self, generation: int) -> None:
        """Report the first sight of ``generation``."""
        if generation not in self._generations:
            self._generations.add(generation)
            self.trace.emit("compare.rebalance", generation=generation)

    def _on_revoke(self, consumer, partitions: list) -> None:
        self._rebalanced("revoke", partitions)
        self._change_ownership(self._owned - _pairs(partitions))

    def _on_lost(self, consumer, partitions: list) -> None:
        self._rebalanced("lost", partitions)
        self._change_ownership(self._owned - _pairs(partitions))

    def _rebalanced(self, callback: str, partitions: list, generation: int | None = None) -> None:
        pairs = sorted(map(list, _pairs(partitions)))
        self.trace.emit("rdkafka.rebalance", callback=callback, partitions=pairs, generation=generation)

    def _change_ownership(self, owned: set[tuple[str, int]]) -> None:
        if owned != self._owned:
            self._owned = owned
            self.trace.emit("compare.assignment", partitions=[list(tp) for tp in sorted(owned)])

    def _on_commit(self, error, partitions: list) -> None:
        from confluent_kafka import KafkaError

        if error is not None and error.code() == KafkaError._NO_OFFSET:
            return  # nothing was stored since the last commit: nothing committed
        offsets = [[tp.topic, tp.partition, tp.offset] for tp in partitions if tp.offset >= 0]
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in partitions if tp.error is not None]
        if offsets or error is not None:
            message = str(error) if error is not None else ("; ".join(failed) or None)
            self.trace.emit("compare.committed", offsets=offsets, error=message)

    def _on_error(self, error) -> None:
        self.trace.emit("rdkafka.error", code=error.name(), error=error.str(), fatal=error.fatal())
        if error.fatal():
            log.error("librdkafka's fatal error: %s", error)
            self.failed = True
            self.stop.set()

    def close(self) -> None:
        """Stop polling (``stop`` is set), then close: revocations and the last commit run inside ``close()``."""
        self._thread.join()
        self.consumer.close()


def _pairs(partitions: list) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in partitions}
