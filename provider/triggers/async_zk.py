"""kazoo's asynchronous calls, awaited on an asyncio event loop.

kazoo answers on its own connection thread; each call here hands the answer to the loop with
``call_soon_threadsafe``, so a trigger never blocks the triggerer's loop and never hops to a worker
thread to wait. Watches come back the same way: a watch callback runs on kazoo's thread and must only
schedule work on the loop (see :meth:`AsyncZooKeeper.watcher`).

On a :class:`~airflow_epochs.triggers.rearming_client.RearmingKazooClient` every call first takes the
client's per-loop gate, so however many triggers read at once (a thousand starting together, or
waking after a session loss) at most ``max_inflight`` of their requests are outstanding.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger
from airflow_epochs.hooks.ledgers import TRIGGERER, ledger_on
from airflow_epochs.triggers.rearming_client import RearmingKazooClient

Watch = Callable[[WatchedEvent], None]


def shared_ledger(client: KazooClient, pipeline: str, *, owner: str = TRIGGERER,
                  root: str = DEFAULT_ROOT) -> EpochLedger:
    """The ledger of ``pipeline`` on a triggerer's shared client: the one place a trigger gets a ledger.

    Not through :meth:`ZooKeeperHook.ledger <airflow_epochs.hooks.zookeeper.ZooKeeperHook.ledger>`: a
    hook holds a session of its own, and a triggerer's triggers (a thousand deferred sensors) share one
    session per connection (``triggers.shared_client.SHARED_CLIENTS``); the ledger is bound by the
    hook's own factory, ``hooks.ledgers.ledger_on``, all the same.

    :param owner: identity recorded on what the ledger writes (a deadline watcher's own, to tell
        watchers that share the session apart).
    """
    return ledger_on(client, pipeline, owner=owner, root=root)


class AsyncZooKeeper:
    """Awaitable reads on a started kazoo client, for code running on ``loop``.

    :param client: a started kazoo client (shared with other triggers).
    :param loop: the event loop the awaiting code runs on.
    """

    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self.gate = client.gate(loop) if isinstance(client, RearmingKazooClient) else None

    def ledger(self, pipeline: str, *, root: str = DEFAULT_ROOT) -> EpochLedger:
        """The ledger of ``pipeline`` on this shared client (a reader: triggers open and vote nothing),
        for the rare blocking step a trigger runs in a thread (``ledger.barrier(...).apply_policy``)."""
        return shared_ledger(self.client, pipeline, root=root)

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

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
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
        return data, stat

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
            with contextlib.suppress(RuntimeError):  # the loop is closed: the trigger is gone
                self.loop.call_soon_threadsafe(on_event, event)

        return watch
