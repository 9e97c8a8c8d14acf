"""A trigger that waits on ZooKeeper watches: the shape shared by every trigger of this package.

Subclasses implement :meth:`ZooKeeperWatchTrigger.check`, a blocking read that sets one-shot watches
(passing ``wake``) and returns the event payload once the condition holds. ``run()`` calls it in a
worker thread (never on the event loop), again after every watch event and every reconnect (so a
change made while disconnected is not missed), over a kazoo session shared with every other trigger
of the process that uses the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from airflow_epochs.triggers.shared_client import SHARED_CLIENTS
from airflow_epochs.zk_settings import ZooKeeperSettings

Wake = Callable[..., None]


def watched_get(client: KazooClient, path: str, wake: Wake | None) -> tuple[bytes, ZnodeStat] | None:
    """Read ``path`` leaving a watch on it; None (with a watch on its creation) if it does not exist.

    One round trip when the node exists (the common case once woken), where exists-then-get costs
    two: with a thousand triggers woken by one seal on a shared session, round trips are the cost.
    """
    while True:
        try:
            data, stat = client.get(path, watch=wake)
            return data, stat
        except NoNodeError:
            # A failed read leaves no watch; exists() does, and catches a creation in between.
            if client.exists(path, watch=wake) is None:
                return None


async def connection_settings(conn_id: str) -> ZooKeeperSettings:
    """The settings of an Airflow ZooKeeper connection, fetched the async way triggers must use."""
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    conn = await ZooKeeperHook.aget_connection(conn_id)
    return ZooKeeperSettings.from_fields(
        host=conn.host, port=conn.port, schema=conn.schema, login=conn.login, password=conn.password,
        extra=conn.extra_dejson,
    )


class ZooKeeperWatchTrigger(BaseTrigger):
    """Base class: fire one event once :meth:`check` returns a payload."""

    zookeeper_conn_id: str

    def check(self, client: KazooClient, wake: Wake) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def timeout_payload(self) -> dict[str, Any]:
        """The event fired when :attr:`give_up_after` runs out."""
        return {"status": "timeout", "waited": self.give_up_after}

    def on_tick(self, client: KazooClient) -> None:
        """Called (in a thread) at each :attr:`tick_seconds`, for time-based decisions."""

    tick_seconds: float | None = None
    # a watcher trigger (AssetWatcher) keeps going after an event; a task trigger fires once
    repeat: bool = False
    # seconds after which the trigger fires {"status": "timeout"} instead (None: wait for ever)
    give_up_after: float | None = None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        settings = await connection_settings(self.zookeeper_conn_id)
        client = await asyncio.to_thread(SHARED_CLIENTS.acquire, settings)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake(*_: Any) -> None:
            # kazoo calls this from its own threads; the loop may be gone if the trigger was cancelled
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(changed.set)

        def on_state(state: str) -> bool:
            if state == KazooState.CONNECTED:
                wake()
            return False

        client.add_listener(on_state)
        give_up = None if self.give_up_after is None else loop.time() + self.give_up_after
        try:
            while True:
                changed.clear()
                payload = await asyncio.to_thread(self.check, client, wake)
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
                    await asyncio.to_thread(self.on_tick, client)
        finally:
            # synchronous and non-blocking: this also runs when the triggerer cancels the trigger
            client.remove_listener(on_state)
            SHARED_CLIENTS.release(settings)
