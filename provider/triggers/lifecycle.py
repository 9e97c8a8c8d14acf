"""One connection lifecycle for every trigger of the package: borrow the triggerer's shared ZooKeeper
session within a budget, hear of its reconnects, and give it back when the trigger ends.

A triggerer runs many triggers; each borrows the one kazoo session per connection the process keeps
(``triggers.shared_client.SHARED_CLIENTS``): ZooKeeper may be down when the trigger
starts, so borrowing is retried within :attr:`budget` seconds; a refused TLS certificate is a
configuration error that waiting cannot fix. While the trigger runs, :class:`TriggerSession` sets
``changed`` when one of its watches fires, and on every reconnect: a client that keeps its watches
across a lost connection (the re-arming client) tells a waiting trigger of a change through them; any
other client drops them, so every reconnect must be followed by a look. Giving the session back is
synchronous and never blocks: it runs in a cancelled trigger's ``finally`` on the loop.

What a trigger checks is its family's asynchronous watch (``recipes/<family>/watch.py``, the kernel's
``state/watches.py``), on ``TriggerSession.store``: no trigger reads a znode by path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

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
from airflow_epochs.coordination import DEFAULT_ROOT, AccessDenied, EpochLedger
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.hooks.ledgers import TRIGGERER, ledger_on
from airflow_epochs.triggers.rearming_client import RearmingKazooClient
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

log = logging.getLogger(__name__)

# What a check may meet while the session is away; it then waits for the reconnect.
TRANSIENT = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, ConnectionClosedError, KazooTimeoutError,
             ZooKeeperUnreachable)

__all__ = ["TRANSIENT", "SessionUnavailable", "TriggerSession", "borrowed_session", "connection_settings",
           "refused", "session_ledger"]


class SessionUnavailable(Exception):
    """The shared session could not be had: ZooKeeper unreachable for the whole budget, or a connection
    that waiting cannot fix (a refused certificate). ``reason`` is what the trigger's error event says."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


@dataclass
class TriggerSession:
    """A trigger's view of the shared session: the async store its watches read, the watch callback
    that wakes it, and the events a waiting trigger awaits.

    :param client: the shared, started client.
    :param loop: the trigger's event loop.
    :param on_event: called on the loop with each fired watch, before ``changed`` is set.
    """

    client: KazooClient
    loop: asyncio.AbstractEventLoop
    on_event: Callable[[WatchedEvent], None] | None = None
    settings: ZooKeeperSettings | None = None  # what it connected with (a refusal names its identity)

    def __post_init__(self) -> None:
        self.store = AsyncZooKeeper(self.client, self.loop)
        self.changed = asyncio.Event()  # a watch fired, or the session came back
        self.reconnected = asyncio.Event()
        self.wake: Watch = self.store.watcher(self._fired)
        self._keeps_watches = isinstance(self.client, RearmingKazooClient)

    def _fired(self, event: WatchedEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)
        self.changed.set()

    def on_state(self, state: str) -> bool:
        """The client's state listener (kazoo's thread): a reconnect wakes the trigger."""
        if state == KazooState.CONNECTED:
            with contextlib.suppress(RuntimeError):  # the loop is gone with its trigger
                self.loop.call_soon_threadsafe(self.reconnected.set)
                if not self._keeps_watches:
                    self.loop.call_soon_threadsafe(self.changed.set)
        return False

    def ledger(self, pipeline: str, *, owner: str = TRIGGERER, root: str = DEFAULT_ROOT) -> EpochLedger:
        """The ledger of ``pipeline`` on the shared session (see :func:`session_ledger`)."""
        return session_ledger(self.client, pipeline, owner=owner, root=root)

    async def changed_within(self, seconds: float | None) -> bool:
        """Wait for a change for at most ``seconds`` (None: for ever); whether one came."""
        if seconds is None:
            await self.changed.wait()
            return True
        try:
            await asyncio.wait_for(self.changed.wait(), timeout=max(0.0, seconds))
        except asyncio.TimeoutError:
            return False
        return True

    async def session_back(self, seconds: float) -> None:
        """After a transient failure: wait until the session is back, or a watch fired, or ``seconds``."""
        self.reconnected.clear()
        if self.client.connected:  # back already: look again after a breath (no busy loop)
            await asyncio.sleep(min(0.1, seconds))
            return
        waits = [asyncio.ensure_future(event.wait()) for event in (self.changed, self.reconnected)]
        try:
            await asyncio.wait(waits, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()


def session_ledger(client: KazooClient, pipeline: str, *, owner: str = TRIGGERER,
                   root: str = DEFAULT_ROOT) -> EpochLedger:
    """The ledger of ``pipeline`` on a triggerer's shared client: the triggers' one way to a ledger,
    for a family's handle (``.barrier(...)``, ``.deadlines()``). Not through
    :meth:`ZooKeeperHook.ledger <airflow_epochs.hooks.zookeeper.ZooKeeperHook.ledger>`: a hook holds a
    session of its own, and a triggerer's triggers share one session per connection; the ledger is bound
    by the hook's own factory, ``hooks.ledgers.ledger_on``, all the same. ``owner`` tells watchers that
    share the session apart where they write (a deadline watcher's alerts)."""
    return ledger_on(client, pipeline, owner=owner, root=root)


async def _borrow(conn_id: str, settings: ZooKeeperSettings, budget: float) -> KazooClient:
    loop = asyncio.get_running_loop()
    started = loop.time()
    pause = 0.5
    while True:  # ZooKeeper may be down when the trigger starts: wait for it, within the budget
        try:
            return await SHARED_CLIENTS.acquire_async(settings)
        except TRANSIENT as exc:
            if loop.time() - started + pause >= budget:
                raise SessionUnavailable(f"ZooKeeper at {','.join(settings.hosts)} could not be reached for "
                                         f"{budget:.0f} s ({exc!r})") from exc
            log.warning("ZooKeeper is not reachable yet (%r); trying again in %.1f s", exc, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
        except InvalidConnection as exc:  # a refused TLS certificate: waiting cannot fix it
            raise SessionUnavailable(f"ZooKeeper connection refused: {exc}") from exc
        except (NoAuthError, AccessDenied) as exc:  # rejected credentials: waiting cannot fix them either
            raise SessionUnavailable(refused(conn_id, settings, "the session")) from exc


@contextlib.asynccontextmanager
async def borrowed_session(conn_id: str, *, budget: float = 600.0,
                           on_event: Callable[[WatchedEvent], None] | None = None) -> AsyncIterator[TriggerSession]:
    """The shared session of connection ``conn_id`` for the duration of the block.

    :param budget: seconds to keep trying while ZooKeeper is unreachable.
    :param on_event: called with each fired watch (see :class:`TriggerSession`).
    :raises SessionUnavailable: no session within the budget, or a connection that cannot work.
    """
    settings = await connection_settings(conn_id)
    client = await _borrow(conn_id, settings, budget)
    session = TriggerSession(client, asyncio.get_running_loop(), on_event, settings)
    client.add_listener(session.on_state)
    try:
        yield session
    finally:
        # synchronous and non-blocking: this also runs when the triggerer cancels the trigger
        client.remove_listener(session.on_state)
        SHARED_CLIENTS.release(settings)
