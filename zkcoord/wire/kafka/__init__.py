"""Kafka's own wire protocol over kio's message schemas: frames, the group APIs mapped onto zkcoord's typed
messages, the versions served and the address rewrites of a gateway (docs/kafka-protocol.md).

Pure: no IO. The listener that carries it is :mod:`zkcoord.server.kafka_listener`.
"""
