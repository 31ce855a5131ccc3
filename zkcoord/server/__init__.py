"""The coordinator's network side (architecture.md): gevent IO; nothing pure may import this package."""
