"""A loopback proxy between kazoo and a real ZooKeeper that parses the wire protocol's frames and, on
request, drops the answer to a write that committed, then cuts the connection.

It terminates TLS on both sides, as the tests' ZooKeeper requires: it serves the server's certificate and
requires our client certificate (mutual TLS, so no other local user can use it), and connects upstream
with our client certificate. One asyncio loop in a thread carries every connection (an SSL object must
not be read and written from two threads at once).

That is the fault this project's "true answers" promise is about: the server applied the request, the
client never hears so (kazoo sees ConnectionLoss and reconnects with the same session through the
proxy). Frames: a 4-byte big-endian length, then the payload. The client's first frame is the
connect request and the server's first is the connect response; after that a request starts with
(xid, op type) and a reply with (xid, zxid, err). The reply to a multi-op is a list of results,
each behind a header (type, done, err); a failed multi answers with error results (type -1).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_epochs.connection.zookeeper import ZooKeeperSettings, split_host

# Op codes that change state (create, delete, setData, setACL, multi, create2, createContainer,
# createTTL); check (13) only ever travels inside a multi.
WRITE_OPS = {1, 2, 5, 7, 14, 15, 19, 21}
MULTI = 14


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
    """Forward ``127.0.0.1:<port>`` to a ZooKeeper; drop armed answers of committed writes.

    :param server: the tests' ZooKeeper (``zk_server``) or one member of the tests' ensemble
        (``ensemble.member(i)``); the proxy speaks TLS on both sides with its certificates and credentials.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        upstream: ZooKeeperSettings = server.settings()
        self.upstream = split_host(upstream.hosts[0])
        self._upstream_tls: ssl.SSLContext = upstream.ssl_context()
        self._serving_tls: ssl.SSLContext = server.server_ssl_context()
        self.lock = threading.Lock()
        self.armed = 0
        self.predicate: Callable[[int], bool] = lambda op: op in WRITE_OPS
        self.dropped: list[int] = []  # op types whose committed answer was dropped
        self.skip = 0  # committed writes still to let through before dropping
        self.committed = 0  # committed writes seen (answers dropped or not)
        self.on_drop: Callable[[], None] | None = None
        self.closed = False
        self.blocked_until = 0.0  # while in the future, new connections are cut at once
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="zk-proxy", daemon=True)
        self._thread.start()
        if not started.wait(15) or not self.port:
            raise RuntimeError("the ZooKeeper proxy did not start")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def hosts(self) -> str:
        """Gone: the proxy speaks TLS and wants our certificate (see :meth:`client`)."""
        raise AttributeError("proxy.hosts is gone: the proxy speaks TLS and wants our client certificate; use "
                             "proxy.client(chroot, **kazoo_kwargs), proxy.settings(chroot) or proxy.connection(chroot)")

    def settings(self, chroot: str = "", **kwargs: Any) -> ZooKeeperSettings:
        """Client settings of ``chroot`` through this proxy (see ``zk_server.settings``)."""
        return self.server.settings(chroot, via=self.address, **kwargs)

    def client(self, chroot: str = "", **kwargs: Any) -> Any:
        """A kazoo client of ``chroot`` through this proxy (see ``zk_server.client``)."""
        return self.server.client(chroot, via=self.address, **kwargs)

    def connection(self, chroot: str = "", **extra: Any) -> dict[str, Any]:
        """An Airflow ``zookeeper`` connection to ``chroot`` through this proxy (see ``zk_server.connection``)."""
        return self.server.connection(chroot, via=self.address, **extra)

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
        if not self.closed:
            asyncio.run_coroutine_threadsafe(self._cut_all(), self.loop).result(timeout=10)

    def unblock(self) -> None:
        with self.lock:
            self.blocked_until = 0.0

    def disarm(self) -> None:
        with self.lock:
            self.armed = 0

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    # -- the loop's side ------------------------------------------------------------------------

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self._listener = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._serving_tls,
                                 ssl_handshake_timeout=10))
        self.port = self._listener.sockets[0].getsockname()[1]
        started.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    async def _shutdown(self) -> None:
        self._listener.close()
        await self._cut_all()

    async def _cut_all(self) -> None:
        for pair in list(self._pairs):
            self._cut(pair)

    def _cut(self, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        self._pairs.discard(pair)
        for writer in pair:
            writer.transport.abort()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.closed or time.monotonic() < self.blocked_until:
            client_writer.transport.abort()
            return
        host, port = self.upstream
        try:
            server_reader, server_writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, ssl=self._upstream_tls, server_hostname=host), timeout=10)
        except (OSError, asyncio.TimeoutError):
            client_writer.transport.abort()
            return
        pair = (client_writer, server_writer)
        self._pairs.add(pair)
        pending: dict[int, int] = {}  # xid -> op type, of requests awaiting their answer
        forward = asyncio.ensure_future(self._client_to_server(client_reader, server_writer, pending))
        backward = asyncio.ensure_future(self._server_to_client(server_reader, client_writer, pending))
        await asyncio.wait({forward, backward}, return_when=asyncio.FIRST_COMPLETED)
        self._cut(pair)
        for task in (forward, backward):
            task.cancel()

    async def _client_to_server(self, client: asyncio.StreamReader, server: asyncio.StreamWriter,
                                pending: dict[int, int]) -> None:
        first = True
        while True:
            frame = await _read_frame(client)
            if frame is None:
                return
            if not first and len(frame) >= 12:
                xid, op = struct.unpack(">ii", frame[4:12])
                if xid >= 0:
                    pending[xid] = op
            first = False
            try:
                server.write(frame)
                await server.drain()
            except (OSError, RuntimeError):
                return

    async def _server_to_client(self, server: asyncio.StreamReader, client: asyncio.StreamWriter,
                                pending: dict[int, int]) -> None:
        first = True
        while True:
            frame = await _read_frame(server)
            if frame is None:
                return
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
                    if hook is not None:  # off the loop: the hook may use this proxy too
                        await self.loop.run_in_executor(None, hook)
                    if drop:
                        return  # the write committed; its answer never arrives
            first = False
            try:
                client.write(frame)
                await client.drain()
            except (OSError, RuntimeError):
                return


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (length,) = struct.unpack(">i", head)
        body = await reader.readexactly(length) if length > 0 else b""
    except (asyncio.IncompleteReadError, OSError):
        return None
    return head + body
