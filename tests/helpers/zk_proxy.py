"""A loopback proxy between kazoo and a real ZooKeeper that parses the wire protocol's frames and, on
request, drops the answer to a write that committed, then cuts the connection.

That is the fault this project's "true answers" promise is about: the server applied the request, the
client never hears so (kazoo sees ConnectionLoss and reconnects with the same session through the
proxy). Frames: a 4-byte big-endian length, then the payload. The client's first frame is the
connect request and the server's first is the connect response; after that a request starts with
(xid, op type) and a reply with (xid, zxid, err). The reply to a multi-op is a list of results,
each behind a header (type, done, err); a failed multi answers with error results (type -1).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable

# Op codes that change state (create, delete, setData, setACL, multi, create2, createContainer,
# createTTL); check (13) only ever travels inside a multi.
WRITE_OPS = {1, 2, 5, 7, 14, 15, 19, 21}
MULTI = 14


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        try:
            chunk = sock.recv(n)
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (length,) = struct.unpack(">i", head)
    body = _read_exact(sock, length) if length > 0 else b""
    return None if body is None else head + body


def committed(op: int, reply: bytes) -> bool:
    """Whether a reply frame (length prefix included) says that a write of type ``op`` committed."""
    _xid, _zxid, err = struct.unpack(">iqi", reply[4:20])
    if err != 0:
        return False
    if op == MULTI and len(reply) >= 29:
        (first_type,) = struct.unpack(">i", reply[20:24])
        return first_type != -1
    return True


class LostAnswerProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``; drop armed answers of committed writes.

    :param upstream: ``host:port`` of the real ZooKeeper.
    """

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.armed = 0
        self.predicate: Callable[[int], bool] = lambda op: op in WRITE_OPS
        self.dropped: list[int] = []  # op types whose committed answer was dropped
        self.skip = 0  # committed writes still to let through before dropping
        self.committed = 0  # committed writes seen (answers dropped or not)
        self.on_drop: Callable[[], None] | None = None
        self.closed = False
        self.blocked_until = 0.0  # while in the future, new connections are cut at once
        self.connections: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, name="zk-proxy-accept", daemon=True).start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def drop_next_committed_write(
        self, count: int = 1, *, ops: set[int] | None = None, skip: int = 0,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        """Drop the answers of the next ``count`` committed writes (of ``ops``, default any write),
        after letting ``skip`` committed writes through. ``on_drop`` runs when an answer is dropped,
        before the connection is cut: another client acts between the commit and the caller's retry."""
        with self.lock:
            self.armed = count
            self.skip = skip
            self.on_drop = on_drop
            wanted = WRITE_OPS if ops is None else ops
            self.predicate = lambda op: op in wanted

    def block(self, seconds: float) -> None:
        """Refuse (accept and cut) new connections for ``seconds``: ZooKeeper looks unreachable."""
        with self.lock:
            self.blocked_until = time.monotonic() + seconds

    def cut(self) -> None:
        """Cut every open connection (the clients see ConnectionLoss and reconnect, unless blocked)."""
        for a, b in list(self.connections):
            self._cut(a, b)

    def unblock(self) -> None:
        with self.lock:
            self.blocked_until = 0.0

    def disarm(self) -> None:
        with self.lock:
            self.armed = 0

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        for a, b in list(self.connections):
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self.blocked_until:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            self.connections.append((client, server))
            pending: dict[int, int] = {}  # xid -> op type, of requests awaiting their answer
            threading.Thread(target=self._client_to_server, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(client, server, pending), daemon=True).start()

    @staticmethod
    def _cut(client: socket.socket, server: socket.socket) -> None:
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _client_to_server(self, client: socket.socket, server: socket.socket, pending: dict[int, int]) -> None:
        first = True
        while True:
            frame = _read_frame(client)
            if frame is None:
                break
            if not first and len(frame) >= 12:
                xid, op = struct.unpack(">ii", frame[4:12])
                if xid >= 0:
                    pending[xid] = op
            first = False
            try:
                server.sendall(frame)
            except OSError:
                break
        self._cut(client, server)

    def _server_to_client(self, client: socket.socket, server: socket.socket, pending: dict[int, int]) -> None:
        first = True
        while True:
            frame = _read_frame(server)
            if frame is None:
                break
            if not first and len(frame) >= 20:
                (xid,) = struct.unpack(">i", frame[4:8])
                op = pending.pop(xid, None) if xid >= 0 else None
                if op is not None and op in WRITE_OPS and committed(op, frame):
                    with self.lock:
                        self.committed += 1
                        drop = self.armed > 0 and self.predicate(op)
                        if drop and self.skip > 0:
                            self.skip -= 1
                            drop = False
                        if drop:
                            self.armed -= 1
                            self.dropped.append(op)
                        hook = self.on_drop if drop else None
                    if hook is not None:
                        hook()
                    if drop:
                        break  # the write committed; its answer never arrives
            first = False
            try:
                client.sendall(frame)
            except OSError:
                break
        self._cut(client, server)
