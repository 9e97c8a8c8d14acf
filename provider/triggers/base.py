"""A trigger that waits on ZooKeeper watches: the shape shared by every trigger of this package.

Subclasses implement :meth:`ZooKeeperWatchTrigger.check`, a coroutine that reads through
:class:`~airflow_epochs.triggers.async_zk.AsyncZooKeeper` (kazoo's asynchronous calls, awaited on the
triggerer's loop: no thread hop, nothing blocks the loop), leaves one-shot watches (passing
``wake``) and returns the event payload once the condition holds. When a watch fires,
:meth:`~ZooKeeperWatchTrigger.on_watch` sees what it says first, so a check that already knows
enough (a seal node was created) answers without reading. ``run()`` checks again after every watch
event, over a kazoo session shared with every other trigger of the process that uses the same
connection. That session's client re-arms the watches after a lost connection and the server fires
those whose node changed meanwhile (a change made while disconnected is not missed, and a wait whose
node did not change is not woken: no storm of reads after a failover); when the session itself is
lost, every watch hears ``NONE`` and checks again. A lost connection inside a check waits for the
session to come back, for at most :attr:`reconnect_budget` seconds, instead of failing the deferred
task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings, ZooKeeperUnreachable
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.rearming_client import RearmingKazooClient
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

log = logging.getLogger(__name__)

# What a check may meet while the session is away; it then waits for the reconnect.
TRANSIENT = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, ConnectionClosedError, KazooTimeoutError,
             ZooKeeperUnreachable)

__all__ = ["TRANSIENT", "Watch", "ZooKeeperWatchTrigger", "connection_settings"]


async def connection_settings(conn_id: str) -> ZooKeeperSettings:
    """The settings of an Airflow ZooKeeper connection, fetched the async way triggers must use; a
    connection without credentials to the CLI's embedded server gets that server's, as in
    :class:`~airflow_epochs.hooks.zookeeper.ZooKeeperHook` (the server accepts no client without them)."""
    from airflow_epochs.connection.embedded import with_embedded_credentials
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    conn = await ZooKeeperHook.aget_connection(conn_id)
    settings = ZooKeeperSettings.from_fields(
        host=conn.host, port=conn.port, schema=conn.schema, login=conn.login, password=conn.password,
        extra=conn.extra_dejson,
    )
    # It reads the state folder and asks the server: off the triggerer's loop.
    return await asyncio.to_thread(with_embedded_credentials, settings)


class ZooKeeperWatchTrigger(BaseTrigger):
    """Base class: fire one event once :meth:`check` returns a payload."""

    zookeeper_conn_id: str
    tick_seconds: float | None = None
    # a watcher trigger (AssetWatcher) keeps going after an event; a task trigger fires once
    repeat: bool = False
    # seconds after which the trigger fires {"status": "timeout"} instead (None: wait for ever)
    give_up_after: float | None = None
    # seconds a check may wait for a lost ZooKeeper session to come back before it fails the task
    reconnect_budget: float = 600.0

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def on_watch(self, event: WatchedEvent) -> None:
        """A watch fired (called on the loop before the next :meth:`check`); record what it says."""

    async def on_tick(self, zk: AsyncZooKeeper) -> None:
        """Called at each :attr:`tick_seconds`, for time-based decisions (straggler deadlines)."""

    def timeout_payload(self) -> dict[str, Any]:
        """The event fired when :attr:`give_up_after` runs out."""
        return {"status": "timeout", "waited": self.give_up_after}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        settings = await connection_settings(self.zookeeper_conn_id)
        loop = asyncio.get_running_loop()
        started = loop.time()
        pause = 0.5
        while True:  # ZooKeeper may be down when the trigger starts: wait for it, within the budget
            try:
                client = await SHARED_CLIENTS.acquire_async(settings)
                break
            except TRANSIENT as exc:
                if loop.time() - started + pause >= self.reconnect_budget:
                    yield TriggerEvent({"status": "error", "reason": (
                        f"ZooKeeper at {','.join(settings.hosts)} could not be reached for "
                        f"{self.reconnect_budget:.0f} s ({exc!r})")})
                    return
                log.warning("ZooKeeper is not reachable yet (%r); trying again in %.1f s", exc, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 10.0)
            except InvalidConnection as exc:  # a refused TLS certificate: waiting cannot fix it
                yield TriggerEvent({"status": "error", "reason": f"ZooKeeper connection refused: {exc}"})
                return
        zk = AsyncZooKeeper(client, loop)
        changed = asyncio.Event()

        def on_event(event: WatchedEvent) -> None:
            self.on_watch(event)
            changed.set()

        wake = zk.watcher(on_event)
        reconnected = asyncio.Event()
        # A client that keeps its watches across a lost connection tells a waiting trigger of a change
        # through them; any other client drops them, so every reconnect must be followed by a check.
        keeps_watches = isinstance(client, RearmingKazooClient)

        def on_state(state: str) -> bool:
            if state == KazooState.CONNECTED:
                with contextlib.suppress(RuntimeError):  # the loop is gone with its trigger
                    loop.call_soon_threadsafe(reconnected.set)
                    if not keeps_watches:
                        loop.call_soon_threadsafe(changed.set)
            return False

        client.add_listener(on_state)
        give_up = None if self.give_up_after is None else loop.time() + self.give_up_after
        lost_since: float | None = None
        try:
            while True:
                changed.clear()
                try:
                    payload = await self.check(zk, wake)
                except TRANSIENT as exc:
                    now = loop.time()
                    if lost_since is None:
                        lost_since = now
                        log.warning("ZooKeeper went away during a check (%r); waiting up to %.0f s for the "
                                    "session to come back", exc, self.reconnect_budget)
                    if now - lost_since >= self.reconnect_budget:
                        yield TriggerEvent({"status": "error", "reason": (
                            f"ZooKeeper at {client.hosts} was unreachable for {self.reconnect_budget:.0f} s "
                            f"({exc!r})")})
                        return
                    with_deadline = min(5.0, self.reconnect_budget - (now - lost_since))
                    reconnected.clear()
                    if client.connected:  # back already: look again after a breath (no busy loop)
                        await asyncio.sleep(min(0.1, with_deadline))
                        continue
                    await _first_of(changed, reconnected, timeout=with_deadline)
                    continue
                if lost_since is not None:
                    log.info("ZooKeeper is back after %.1f s", loop.time() - lost_since)
                    lost_since = None
                if payload is not None:
                    yield TriggerEvent(payload)
                    if not self.repeat:
                        return
                    continue
                waits = [t for t in (self.tick_seconds, None if give_up is None else give_up - loop.time())
                         if t is not None]
                if not waits:
                    await changed.wait()
                    continue
                try:
                    await asyncio.wait_for(changed.wait(), timeout=max(0.0, min(waits)))
                except asyncio.TimeoutError:
                    if give_up is not None and loop.time() >= give_up:
                        yield TriggerEvent(self.timeout_payload())
                        return
                    try:
                        await self.on_tick(zk)
                    except TRANSIENT:
                        continue  # the next check waits for the session
        finally:
            # synchronous and non-blocking: this also runs when the triggerer cancels the trigger
            client.remove_listener(on_state)
            SHARED_CLIENTS.release(settings)

    def check_now(self, client: KazooClient) -> dict[str, Any] | None:
        """One check, blocking, on a client of the caller's (a sensor's poke, before it defers).

        A deadline that has passed is applied first (a straggler policy), as the trigger would.
        """

        async def once() -> dict[str, Any] | None:
            zk = AsyncZooKeeper(client, asyncio.get_running_loop())
            payload = await self.check(zk, _ignore)
            if payload is None and self.tick_seconds is not None and self.tick_seconds <= 0.05:
                await self.on_tick(zk)
                payload = await self.check(zk, _ignore)
            return payload

        return asyncio.run(once())


async def _first_of(*events: asyncio.Event, timeout: float) -> None:
    """Wait until one of ``events`` is set, for at most ``timeout`` seconds."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _ignore(_event: WatchedEvent) -> None:
    """A watch nobody waits on (one-shot checks)."""
