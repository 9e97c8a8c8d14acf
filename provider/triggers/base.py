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
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings, ZooKeeperUnreachable
from airflow_epochs.coordination import AccessDenied
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.notices import NOTICE_EVERY
from airflow_epochs.triggers.rearming_client import RearmingKazooClient
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

log = logging.getLogger(__name__)

# What a check may meet while the session is away; it then waits for the reconnect.
TRANSIENT = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, ConnectionClosedError, KazooTimeoutError,
             ZooKeeperUnreachable)

__all__ = ["TRANSIENT", "Watch", "ZooKeeperWatchTrigger", "connection_settings", "refused"]


async def _connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id``, the async way triggers must use. ``airflow dags test`` runs a
    deferred task's trigger inline, where that way sees the secrets backends and ``AIRFLOW_CONN_*`` but not
    the metadata database (Airflow 3.3 raises "isn't defined" for a connection ``airflow connections add``
    made); only then is the connection looked up as the command line does (the metadata database
    included), off the loop."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_epochs.coordination import InvalidInput
    from airflow_epochs.hooks.connections import connection_outside_task
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    try:
        return await ZooKeeperHook.aget_connection(conn_id)
    except AirflowNotFoundException as missing:
        try:
            return await asyncio.to_thread(connection_outside_task, conn_id)
        except InvalidInput:
            raise missing from None


def refused(conn_id: str, settings: ZooKeeperSettings | None, what: str) -> str:
    """The reason of a NoAuth refusal: the connection and the identity it connected as (or that it has none)."""
    who = f"digest user {settings.login!r}" if settings is not None and settings.login else "no credentials"
    return (f"ZooKeeper refused {what} (NoAuth) to connection {conn_id!r} ({who}): the pipeline's ACL does not "
            "let that identity read it" + ("" if settings is not None and settings.login else
                                           "; give the connection the login and password of its owner"))


def runs_inline() -> bool:
    """Whether this trigger runs inline in a task's own process (``airflow dags test``, ``dag.test()``),
    where Airflow keeps a SIGTERM handler that only calls the task's ``on_kill`` (the supervisor that would
    then kill the process is not there), rather than in a triggerer, which handles its own signals."""
    try:
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms
    except ImportError:  # pragma: no cover - another Airflow than the one we support
        return False
    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), InProcessSupervisorComms)


@contextlib.contextmanager
def sigterm_ends_the_wait(loop: asyncio.AbstractEventLoop, on_term: Callable[[], None]) -> Iterator[None]:
    """Inline only (:func:`runs_inline`), on the main thread: a SIGTERM calls ``on_term`` on the loop instead
    of being swallowed; the previous handler is put back afterwards."""
    if not runs_inline() or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous)


async def connection_settings(conn_id: str) -> ZooKeeperSettings:
    """The settings of an Airflow ZooKeeper connection, fetched the async way triggers must use; a
    connection without credentials to the CLI's embedded server gets that server's, as in
    :class:`~airflow_epochs.hooks.zookeeper.ZooKeeperHook` (the server accepts no client without them)."""
    from airflow_epochs.connection.embedded import with_embedded_credentials

    conn = await _connection(conn_id)
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
    # unix time at which it fires {"status": "timeout"}: the deferring task's own timeout, applied here
    # too because `airflow dags test` runs a trigger inline and applies none (a triggerer does)
    timeout_at: float | None = None
    # seconds between two notices (:meth:`notice`) of a wait that may never end
    notice_every: float = NOTICE_EVERY

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def on_watch(self, event: WatchedEvent) -> None:
        """A watch fired (called on the loop before the next :meth:`check`); record what it says."""

    async def on_tick(self, zk: AsyncZooKeeper) -> None:
        """Called at each :attr:`tick_seconds`, for time-based decisions (straggler deadlines)."""

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        """Why this wait may never end (the pipeline does not exist...), asked at once (``first``) and then
        every :attr:`notice_every` seconds while it waits, and logged; None when nothing looks wrong."""
        return None

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
            except (NoAuthError, AccessDenied):
                yield TriggerEvent({"status": "error", "reason": refused(self.zookeeper_conn_id, settings,
                                                                         "the session")})
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
        ends = [loop.time() + self.give_up_after] if self.give_up_after is not None else []
        if self.timeout_at is not None:
            ends.append(loop.time() + max(0.0, self.timeout_at - time.time()))
        give_up = min(ends) if ends else None
        next_notice = loop.time()
        terminated: list[bool] = []

        def on_term() -> None:
            terminated.append(True)
            changed.set()
            reconnected.set()

        try:
            with sigterm_ends_the_wait(loop, on_term):
                async for event in self._wait(zk, wake, settings, client, changed, reconnected, terminated,
                                              give_up, next_notice):
                    yield event
        finally:
            # synchronous and non-blocking: this also runs when the triggerer cancels the trigger
            client.remove_listener(on_state)
            SHARED_CLIENTS.release(settings)

    async def _wait(self, zk: AsyncZooKeeper, wake: Watch, settings: ZooKeeperSettings, client: KazooClient,
                    changed: asyncio.Event, reconnected: asyncio.Event, terminated: list[bool],
                    give_up: float | None, next_notice: float) -> AsyncIterator[TriggerEvent]:
        """The loop of :meth:`run` on an acquired session: check, wait for a watch, say what it waits for,
        until the payload, the give-up time, a SIGTERM (inline runs) or a lost session past its budget."""
        loop = asyncio.get_running_loop()
        first_notice = True
        lost_since: float | None = None
        while True:
            if terminated:
                yield TriggerEvent({"status": "error", "reason": "terminated (SIGTERM) while waiting"})
                return
            changed.clear()
            try:
                payload = await self.check(zk, wake)
            except (NoAuthError, AccessDenied):
                yield TriggerEvent({"status": "error", "reason": refused(self.zookeeper_conn_id, settings,
                                                                         "a read")})
                return
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
            if loop.time() >= next_notice:
                next_notice = loop.time() + self.notice_every
                with contextlib.suppress(*TRANSIENT, NoAuthError):  # a notice never fails the wait
                    said = await self.notice(zk, first=first_notice)
                    first_notice = False
                    if said:
                        log.warning("%s", said)
            waits = [t for t in (self.tick_seconds, None if give_up is None else give_up - loop.time(),
                                 next_notice - loop.time()) if t is not None]
            if not waits:
                await changed.wait()
                continue
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(0.0, min(waits)))
            except asyncio.TimeoutError:
                if give_up is not None and loop.time() >= give_up:
                    yield TriggerEvent(self.timeout_payload())
                    return
                if loop.time() >= next_notice:
                    continue  # check again, then say what it waits for
                try:
                    await self.on_tick(zk)
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
