"""The thin consumer client: :class:`Consumer` (poll side) and its background coordinator worker."""

from zkcoord.client.commits import OffsetAndMetadata
from zkcoord.client.config import ConsumerConfig
from zkcoord.client.consumer import Consumer
from zkcoord.client.rebalance import ConsumerRebalanceListener

__all__ = ["Consumer", "ConsumerConfig", "ConsumerRebalanceListener", "OffsetAndMetadata"]
