"""A trigger that waits on ZooKeeper watches: the shape shared by every task trigger of this package.

A subclass names its check (:meth:`ZooKeeperWatchTrigger.check`): a coroutine over its family's
asynchronous watch (``recipes/<family>/watch.py``, the kernel's ``state/watches.py``) that leaves one-shot
watches (passing ``wake``) and returns the event payload once the condition holds. When a watch fires,
:meth:`~ZooKeeperWatchTrigger.on_watch` sees what it says first, so a check that already knows enough
(a seal node was created) answers without reading. The connection is the one lifecycle of
:mod:`airflow_epochs.triggers.lifecycle`: the triggerer's shared session, borrowed within a budget and
given back at the end;
after a lost connection the shared client re-arms the watches and the server fires those whose node
changed meanwhile (a change made while disconnected is not missed, and a wait whose node did not change
is not woken: no storm of reads after a failover). A lost connection inside a check waits for the
session to come back, for at most :attr:`reconnect_budget` seconds, instead of failing the deferred task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Required, TypedDict

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, AccessDenied, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.triggers.lifecycle import (
    TRANSIENT,
    SessionUnavailable,
    TriggerSession,
    borrowed_session,
    connection_settings,
    refused,
)
from airflow_epochs.triggers.notices import NOTICE_EVERY, pipeline_notice

log = logging.getLogger(__name__)

__all__ = ["TRANSIENT", "EpochArguments", "EpochWatchTrigger", "Watch", "ZooKeeperWatchTrigger", "connection_settings",
           "refused"]


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
        try:
            async with borrowed_session(self.zookeeper_conn_id, budget=self.reconnect_budget,
                                        on_event=self.on_watch) as session:
                terminated: list[bool] = []

                def on_term() -> None:
                    terminated.append(True)
                    session.changed.set()
                    session.reconnected.set()

                with sigterm_ends_the_wait(session.loop, on_term):
                    async for event in self._checks(session, terminated):
                        yield event
        except SessionUnavailable as exc:
            yield TriggerEvent({"status": "error", "reason": exc.reason})

    def _give_up_at(self, loop: asyncio.AbstractEventLoop) -> float | None:
        """When, on the loop's clock, the wait times out (its own budget, or the task's timeout)."""
        ends = [loop.time() + self.give_up_after] if self.give_up_after is not None else []
        if self.timeout_at is not None:
            ends.append(loop.time() + max(0.0, self.timeout_at - time.time()))
        return min(ends) if ends else None

    async def _checks(self, session: TriggerSession, terminated: list[bool]) -> AsyncIterator[TriggerEvent]:
        """Check, wait for a watch, say what it waits for, until the payload, the give-up time, a SIGTERM
        (inline runs) or a lost session past its budget."""
        loop = session.loop
        give_up = self._give_up_at(loop)
        next_notice, first_notice = loop.time(), True
        lost_since: float | None = None
        while True:
            if terminated:
                yield TriggerEvent({"status": "error", "reason": "terminated (SIGTERM) while waiting"})
                return
            session.changed.clear()
            try:
                payload = await self.check(session.store, session.wake)
            except (NoAuthError, AccessDenied):
                reason = refused(self.zookeeper_conn_id, session.settings, "a read")
                yield TriggerEvent({"status": "error", "reason": reason})
                return
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
            if loop.time() >= next_notice:
                next_notice = loop.time() + self.notice_every
                with contextlib.suppress(*TRANSIENT, NoAuthError):  # a notice never fails the wait
                    said = await self.notice(session.store, first=first_notice)
                    first_notice = False
                    if said:
                        log.warning("%s", said)
            waits = [t for t in (self.tick_seconds, None if give_up is None else give_up - loop.time(),
                                 next_notice - loop.time()) if t is not None]
            if await session.changed_within(max(0.0, min(waits)) if waits else None):
                continue
            if give_up is not None and loop.time() >= give_up:
                yield TriggerEvent(self.timeout_payload())
                return
            if loop.time() >= next_notice:
                continue  # check again, then say what it waits for
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


class EpochArguments(TypedDict, total=False):
    """The arguments every :class:`EpochWatchTrigger` takes, beside its own (its ``**epoch``)."""

    pipeline: Required[str]
    epoch: Required[int]
    zookeeper_conn_id: str
    root: str
    timeout_at: float | None


class EpochWatchTrigger(ZooKeeperWatchTrigger):
    """A task trigger that waits on one epoch of one pipeline: the arguments it is built from and
    serialized to (:class:`EpochArguments`, then a subclass's own in :meth:`arguments`), validated here,
    and the notice of a wait that may never end, which names what it waits for (:meth:`waiting_for`).

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param timeout_at: unix time at which it fires ``{"status": "timeout"}`` (the sensor's timeout).
    """

    def __init__(self, *, pipeline: str, epoch: int, zookeeper_conn_id: str = "zookeeper_default",
                 root: str = DEFAULT_ROOT, timeout_at: float | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = validate_name("pipeline", pipeline)
        self.epoch = validate_epoch(epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at

    def arguments(self) -> dict[str, Any]:
        """The subclass's own arguments, as its ``__init__`` takes them back (JSON values)."""
        return {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"pipeline": self.pipeline, "epoch": self.epoch, **self.arguments(),
                 "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root, "timeout_at": self.timeout_at})

    def waiting_for(self) -> str | None:
        """What the trigger waits for, in a sentence's words, for :meth:`notice` (None: no notices)."""
        return None

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = self.waiting_for()
        if what is None:
            return None
        return await pipeline_notice(zk, PipelinePaths(self.pipeline, self.root), epoch=self.epoch,
                                     waiting_for=what, first=first)


def _ignore(_event: WatchedEvent) -> None:
    """A watch nobody waits on (one-shot checks)."""
