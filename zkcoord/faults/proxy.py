"""A TCP proxy on 127.0.0.1 that a nemesis cuts or stalls: a network partition without network namespaces.

Each accepted connection gets its own upstream connection and two pump threads, one per direction. A pump
hands on what it read (end of stream included) only while the proxy is open: during a stall it holds the bytes
until :meth:`LoopbackProxy.heal`, so nothing read is lost and neither side sees the other go. A cut resets
every connection (SO_LINGER 0, so the peers get RST) and resets each new one as it is accepted.

IO: sockets and threads. Imports nothing of zkcoord.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
OPEN = "open"
CUT = "cut"
STALLED = "stalled"
CLOSED = "closed"
CHUNK_BYTES = 65536
UPSTREAM_CONNECT_TIMEOUT_S = 5.0
_LINGER_RESET = struct.pack("ii", 1, 0)


def _reset(sock: socket.socket) -> None:
    """Abort ``sock`` with RST: wake a recv blocked on it in another thread, then close with SO_LINGER 0."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    with contextlib.suppress(OSError):
        # Not SHUT_WR: that would send a FIN first. A send blocked on a peer that stopped reading (a stopped
        # process) holds the socket until that peer reads again; the RST goes then.
        sock.shutdown(socket.SHUT_RD)
    sock.close()


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: LoopbackProxy, client: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream: socket.socket | None = None
        self._lock = threading.Lock()
        self._closed = False

    def run(self) -> None:
        if not self.proxy._wait_forwarding():  # a stall holds a new connection before it reaches upstream
            self.reset()
            return
        try:
            upstream = socket.create_connection(self.proxy.upstream, timeout=UPSTREAM_CONNECT_TIMEOUT_S)
        except OSError as exc:  # the upstream is down (a ZooKeeper restart): the client sees its connection end
            log.debug("proxy=%s upstream %s:%d refused: %s", self.proxy.name, *self.proxy.upstream, exc)
            self.close()
            return
        upstream.settimeout(None)
        with self._lock:
            if self._closed:
                upstream.close()
                return
            self.upstream = upstream
        threading.Thread(target=self._pump, args=(upstream, self.client), daemon=True).start()
        self._pump(self.client, upstream)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                data = source.recv(CHUNK_BYTES)
            except OSError:
                break
            # End of stream is held during a stall like data: the other side must not see this one go.
            if not self.proxy._wait_forwarding() or not data:
                break
            try:
                target.sendall(data)
            except OSError:
                break
        if self.proxy.state == CUT:
            self.reset()
        else:
            self.close()

    def _take_sockets(self) -> list[socket.socket]:
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            return [sock for sock in (self.client, self.upstream) if sock is not None]

    def close(self) -> None:
        for sock in self._take_sockets():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.proxy._forget(self)

    def reset(self) -> None:
        for sock in self._take_sockets():
            _reset(sock)
        self.proxy._forget(self)


class LoopbackProxy:
    """A TCP proxy on 127.0.0.1 in front of one upstream address, which the nemesis cuts or stalls."""

    def __init__(self, upstream: tuple[str, int], name: str = ""):
        """``upstream`` may be assigned later (a node's port once it serves): each new connection reads it."""
        self.upstream = (upstream[0], int(upstream[1]))
        self.name = name or f"{upstream[0]}:{upstream[1]}"
        self.state = OPEN
        self.port = 0
        self._changed = threading.Condition()
        self._links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def start(self) -> LoopbackProxy:
        """Bind 127.0.0.1 on a free port and accept in a daemon thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, 0))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, name=f"proxy-{self.name}", daemon=True)
        self._acceptor.start()
        log.info("proxy=%s listening on %s:%d for %s:%d", self.name, HOST, self.port, *self.upstream)
        return self

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def connect_string(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def connections(self) -> int:
        """Client connections open (or held) now."""
        with self._changed:
            return len(self._links)

    def cut(self) -> None:
        """Reset every open connection, and every new one at once, until :meth:`heal`."""
        self._set_state(CUT)
        for link in self._take_links():
            link.reset()

    def stall(self) -> None:
        """Forward nothing either way; open connections stay open, new ones are accepted and held."""
        self._set_state(STALLED)

    def heal(self) -> None:
        """Forward again: held connections resume with every byte read meanwhile."""
        self._set_state(OPEN)

    def close(self) -> None:
        """Stop accepting and reset every connection."""
        self._set_state(CLOSED)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
            self._listener.close()
        for link in self._take_links():
            link.reset()
        if self._acceptor is not None:
            self._acceptor.join(timeout=5)

    def __enter__(self) -> LoopbackProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- for the links ------------------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        with self._changed:
            if self.state == CLOSED:
                return
            if self.state != state:
                log.info("proxy=%s %s -> %s connections=%d", self.name, self.state, state, len(self._links))
            self.state = state
            self._changed.notify_all()

    def _wait_forwarding(self) -> bool:
        """Block while stalled; True if bytes may pass now, False if the proxy is cut or closed."""
        with self._changed:
            self._changed.wait_for(lambda: self.state != STALLED)
            return self.state == OPEN

    def _take_links(self) -> list[_Link]:
        with self._changed:
            links, self._links = list(self._links), set()
        return links

    def _forget(self, link: _Link) -> None:
        with self._changed:
            self._links.discard(link)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._changed:
                refused = self.state in (CUT, CLOSED)
                link = _Link(self, client)
                if not refused:
                    self._links.add(link)
            if refused:
                _reset(client)
                continue
            threading.Thread(target=link.run, name=f"proxy-{self.name}-link", daemon=True).start()
