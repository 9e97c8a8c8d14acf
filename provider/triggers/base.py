"""A trigger that waits on ZooKeeper watches: the shape shared by every task trigger of this package.

A subclass names its check (:meth:`ZooKeeperWatchTrigger.check`): a coroutine over its family's
asynchronous watch (``recipes/<family>/watch.py``, the kernel's ``state/watches.py``) that leaves one-shot
watches (passing ``wake``) and returns the event payload once the condition holds. When a watch fires,
:meth:`~ZooKeeperWatchTrigger.on_watch` sees what it says first, so a check that already knows enough
(a seal node was created) answers without reading. The connection is the one lifecycle of
:mod:`.lifecycle`: the triggerer's shared session, borrowed within a budget and given back at the end;
after a lost connection the shared client re-arms the watches and the server fires those whose node
changed meanwhile (a change made while disconnected is not missed, and a wait whose node did not change
is not woken: no storm of reads after a failover). A lost connection inside a check waits for the
session to come back, for at most :attr:`reconnect_budget` seconds, instead of failing the deferred task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.triggers.lifecycle import (
    TRANSIENT,
    SessionUnavailable,
    TriggerSession,
    borrowed_session,
    connection_settings,
)

log = logging.getLogger(__name__)

__all__ = ["TRANSIENT", "Watch", "ZooKeeperWatchTrigger", "connection_settings"]


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
        try:
            async with borrowed_session(self.zookeeper_conn_id, budget=self.reconnect_budget,
                                        on_event=self.on_watch) as session:
                async for event in self._checks(session):
                    yield event
        except SessionUnavailable as exc:
            yield TriggerEvent({"status": "error", "reason": exc.reason})

    async def _checks(self, session: TriggerSession) -> AsyncIterator[TriggerEvent]:
        loop = asyncio.get_running_loop()
        give_up = None if self.give_up_after is None else loop.time() + self.give_up_after
        lost_since: float | None = None
        while True:
            session.changed.clear()
            try:
                payload = await self.check(session.store, session.wake)
            except TRANSIENT as exc:
                now = loop.time()
                if lost_since is None:
                    lost_since = now
                    log.warning("ZooKeeper went away during a check (%r); waiting up to %.0f s for the "
                                "session to come back", exc, self.reconnect_budget)
                if now - lost_since >= self.reconnect_budget:
                    yield TriggerEvent({"status": "error", "reason": (
                        f"ZooKeeper at {session.client.hosts} was unreachable for {self.reconnect_budget:.0f} s "
                        f"({exc!r})")})
                    return
                await session.session_back(min(5.0, self.reconnect_budget - (now - lost_since)))
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
            if await session.changed_within(min(waits) if waits else None):
                continue
            if give_up is not None and loop.time() >= give_up:
                yield TriggerEvent(self.timeout_payload())
                return
            try:
                await self.on_tick(session.store)
            except TRANSIENT:
                continue  # the next check waits for the session

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


def _ignore(_event: WatchedEvent) -> None:
    """A watch nobody waits on (one-shot checks)."""
