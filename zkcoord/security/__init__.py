"""TLS and SASL on the wire: server contexts from Kafka's ``ssl.*`` properties, and the client side that tools and
members use from ``--command-config`` (docs/security.md)."""
