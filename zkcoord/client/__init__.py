"""The thin consumer client: :class:`Consumer` (poll side) and its background coordinator worker."""

from zkcoord.client.config import ConsumerConfig
from zkcoord.client.consumer import Consumer, ConsumerRebalanceListener, OffsetAndMetadata

__all__ = ["Consumer", "ConsumerConfig", "ConsumerRebalanceListener", "OffsetAndMetadata"]
