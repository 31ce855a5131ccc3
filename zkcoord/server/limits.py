"""How many connections a listener takes: ``max.connections`` in all and ``max.connections.per.ip`` from one address
(with ``max.connections.per.ip.overrides``), as Kafka bounds them, shared by the msgpack and the Kafka listener.

Refusals come in floods exactly when the log matters most: at most one line per interval says so, and the next
says how many went unlogged.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 10.0


class ConnectionLimits:
    """Counts a listener's open connections by IP and refuses those over its bounds (None: no per-IP bound)."""

    def __init__(
        self,
        what: str,
        max_connections: int,
        max_connections_per_ip: int | None = None,
        per_ip_overrides: Mapping[str, int] | None = None,
    ):
        if type(max_connections) is not int or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, got {max_connections!r}")
        self.what = what
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.open = 0
        self.rejected_total = 0
        self._by_ip: Counter[str] = Counter()
        self._unlogged = 0
        self._next_log = 0.0

    def admit(self, peer: tuple, stopping: bool = False) -> bool:
        """Count a new connection from ``peer`` in, or refuse it (logged) when a bound or ``stopping`` says so."""
        ip = peer[0]
        refusal = self._refusal(ip, stopping)
        if refusal is not None:
            self.rejected_total += 1
            self._log_refusal(peer, refusal)
            return False
        self.open += 1
        self._by_ip[ip] += 1
        return True

    def release(self, peer: tuple) -> None:
        """A connection :meth:`admit` counted in has closed."""
        ip = peer[0]
        self.open -= 1
        self._by_ip[ip] -= 1
        if not self._by_ip[ip]:
            del self._by_ip[ip]

    def _refusal(self, ip: str, stopping: bool) -> str | None:
        if stopping:
            return "stopping"
        if self.open >= self.max_connections:
            return "max_connections"
        per_ip = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if per_ip is not None and self._by_ip[ip] >= per_ip:
            return "max_connections_per_ip"
        return None

    def _log_refusal(self, peer: tuple, refusal: str) -> None:
        now = time.monotonic()
        if now < self._next_log:
            self._unlogged += 1
            return
        log.warning(
            "%s refused peer=%s:%s reason=%s connections_open=%d from_ip=%d refused_unlogged=%d",
            self.what,
            peer[0],
            peer[1],
            refusal,
            self.open,
            self._by_ip[peer[0]],
            self._unlogged,
        )
        self._unlogged = 0
        self._next_log = now + REFUSAL_LOG_INTERVAL_S
