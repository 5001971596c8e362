"""A TCP proxy in front of a real Redis that can lose replies: the command reaches Redis and
runs there, but the client's connection is cut before the answer comes back, as a failover
or a network fault does. What a client then does is proven against the real server."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from types import TracebackType


class ReplyLosingProxy:
    """Listens on a free loopback port and forwards to ``host:port``. While
    ``lose_replies`` > 0, each reply from Redis is dropped instead of forwarded, and that
    client's connection closed (one fewer to lose each time)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.lose_replies = 0
        self.lost = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="proxy")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> ReplyLosingProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def _take_loss(self) -> bool:
        with self._lock:
            if self.lose_replies <= 0:
                return False
            self.lose_replies -= 1
            self.lost += 1
            return True

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        self._listener.setblocking(False)
        selector.register(self._listener, selectors.EVENT_READ, None)
        peers: dict[socket.socket, tuple[socket.socket, bool]] = {}  # sock -> (other, is_server)

        def close(sock: socket.socket) -> None:
            other, _ = peers.pop(sock, (None, False))
            for each in (sock, other):
                if each is None:
                    continue
                peers.pop(each, None)
                with contextlib.suppress(KeyError, ValueError):
                    selector.unregister(each)
                each.close()

        while not self._stop.is_set():
            try:
                events = selector.select(timeout=0.05)
            except OSError:
                return
            for key, _ in events:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    try:
                        client, _ = self._listener.accept()
                    except OSError:
                        continue
                    server = socket.create_connection(self.target)
                    peers[client], peers[server] = (server, False), (client, True)
                    selector.register(client, selectors.EVENT_READ, None)
                    selector.register(server, selectors.EVENT_READ, None)
                    continue
                if sock not in peers:
                    continue
                other, from_server = peers[sock]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    close(sock)
                elif from_server and self._take_loss():
                    close(sock)  # the command ran; its client never hears of it
                else:
                    other.sendall(data)
