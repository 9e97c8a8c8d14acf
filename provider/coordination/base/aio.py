"""ZooKeeper awaited on an asyncio event loop: the node store every family's asynchronous watch reads.

kazoo answers on its own connection thread; each call of :class:`AsyncZooKeeper` hands the answer to
the loop with ``call_soon_threadsafe``, so a watch never blocks the loop and never hops to a worker
thread to wait (a thread a watch would hold for hours: asyncio's default pool has cpus + 4 of them).
Watches come back the same way: a watch callback runs on kazoo's thread and only schedules work on the
loop (:meth:`AsyncZooKeeper.watcher`).

A client with a per-loop ``gate(loop)`` (the triggerer's re-arming client) bounds how many requests
are outstanding: every call first takes the gate. The families' watches take any :class:`NodeStore`
(kazoo's semantics and exceptions), so the core stays free of Airflow and of the triggerer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from airflow_epochs.coordination.base.znode import Znode

__all__ = ["AsyncZooKeeper", "NodeStore", "Watch"]

Watch = Callable[[WatchedEvent], None]


class NodeStore(Protocol):
    """The asynchronous ZooKeeper operations the families' watches need (kazoo's semantics)."""

    async def get(self, path: str, watch: Watch | None = None) -> Znode | None:
        """Data and stat of ``path``, or None (with ``watch``: an exists-watch hears of its creation)."""

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None: ...

    async def children(self, path: str, watch: Watch | None = None) -> list[str] | None: ...

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False) -> str: ...

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat: ...

    async def delete(self, path: str, version: int = -1) -> None: ...

    async def ensure_path(self, path: str) -> None: ...

    def session_id(self) -> int | None:
        """The id of the store's current ZooKeeper session (None while it has none)."""


class AsyncZooKeeper:
    """Awaitable reads and writes on a started kazoo client, for code running on ``loop``.

    :param client: a started kazoo client (possibly shared with other watches of the process).
    :param loop: the event loop the awaiting code runs on.
    """

    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        gate = getattr(client, "gate", None)
        self.gate: asyncio.Semaphore | None = gate(loop) if callable(gate) else None

    async def _call(self, start: Callable[[], Any]) -> Any:
        """Issue one kazoo async call (``start``) and await its answer, inside the gate if any."""
        if self.gate is None:
            return await self._await(start())
        async with self.gate:
            return await self._await(start())

    def _await(self, result: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()

        def settle(done: Any) -> None:
            if future.done():
                return
            if done.successful():
                future.set_result(done.value)
            else:
                future.set_exception(done.exception)

        def from_kazoo(done: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                self.loop.call_soon_threadsafe(settle, done)

        result.rawlink(from_kazoo)
        return future

    async def get(self, path: str, watch: Watch | None = None) -> Znode | None:
        """Data and stat of ``path``, or None if it does not exist (then an exists-watch is left,
        so the creation is heard of)."""
        try:
            data, stat = await self._call(lambda: self.client.get_async(path, watch=watch))
        except NoNodeError:
            if watch is None:
                return None
            stat = await self.exists(path, watch)
            if stat is None:
                return None
            return await self.get(path, watch)  # created in between
        return Znode(data, stat)

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        result: ZnodeStat | None = await self._call(lambda: self.client.exists_async(path, watch=watch))
        return result

    async def children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        try:
            names: list[str] = await self._call(lambda: self.client.get_children_async(path, watch=watch))
        except NoNodeError:
            return None
        return names

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False) -> str:
        created: str = await self._call(lambda: self.client.create_async(path, value, ephemeral=ephemeral))
        return created

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        stat: ZnodeStat = await self._call(lambda: self.client.set_async(path, value, version=version))
        return stat

    async def delete(self, path: str, version: int = -1) -> None:
        await self._call(lambda: self.client.delete_async(path, version=version))

    def session_id(self) -> int | None:
        """The id of the client's current session (None while it has none): an ephemeral node whose
        ``ephemeralOwner`` it is was created by this client, even when the create's answer was lost."""
        client_id = self.client.client_id
        return None if client_id is None else int(client_id[0])

    async def ensure_path(self, path: str) -> None:
        await self._call(lambda: self.client.ensure_path_async(path))

    def watcher(self, on_event: Callable[[WatchedEvent], None]) -> Watch:
        """A kazoo watch callback that runs ``on_event`` on the loop (never on kazoo's thread)."""

        def watch(event: WatchedEvent) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the watch's owner is gone
                self.loop.call_soon_threadsafe(on_event, event)

        return watch
