"""Shared pieces of the legacy-consumer integration tests."""

import threading

from kazoo.client import KazooClient

from zkcoord.legacy.consumer import LegacyConsumer
from zkcoord.zk import admin

FAST = {
    "zookeeper.session.timeout.ms": 1500,
    "rebalance.backoff.ms": 150,
    "auto.commit.enable": False,
}


def prepare_cluster(client: KazooClient, topics: dict[str, int]) -> None:
    admin.register_broker(client, 0, "localhost", 9092, timestamp_ms=1, persistent=True)
    for topic, partitions in topics.items():
        admin.create_topic(client, topic, partitions)


class Recorder:
    """A trace sink that keeps events and lets a test wait for one."""

    def __init__(self):
        self.events = []
        self._changed = threading.Condition()

    def __call__(self, event):
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def of(self, event_type, member=None, **match):
        return [
            e
            for e in list(self.events)
            if e["type"] == event_type
            and (member is None or e["member"] == member)
            and all(e.get(k) == v for k, v in match.items())
        ]

    def wait_for(self, event_type, timeout=20.0, count=1, **match):
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.of(event_type, **match)) >= count, timeout):
                raise TimeoutError(f"no {event_type} {match} within {timeout}s; saw {[e['type'] for e in self.events]}")
        return self.of(event_type, **match)


def member(connect, name, *, recorder=None, listener=None, subscription=None, **props) -> LegacyConsumer:
    """A fast-timing member ``g_<name>`` of group ``g``; ``subscription`` defaults to ``topics={"t": 1}``."""
    config = {**FAST, "group.id": "g", "zookeeper.connect": connect, "consumer.id": name, **props}
    return LegacyConsumer(config, trace=recorder or (), listener=listener, **(subscription or {"topics": {"t": 1}}))
