"""PartitionDeadlineTrigger: watch one partition of one epoch against its declared deadline and,
when it is late, run a callback the way Airflow 3's deadline alerts run theirs, exactly once across
triggerers and deployments.

Airflow's own ``DeadlineAlert`` cannot carry this: its reference is evaluated once, by the scheduler,
when the DAG run is created, and its callback runs when that DAG run is not finished by then. A
partition's deadline is about ZooKeeper state (is the partition sealed, whose vote is missing) and
may be a prediction that changes as votes land; and each deployment's scheduler would alert for its
own DAG run. So the watch is ours: the decision and the one alert are the core's
(:mod:`airflow_epochs.coordination.recipes.deadlines.deadlines`), and the callback is an Airflow callback
(``AsyncCallback(path, kwargs)``, called as Airflow's ``CallbackTrigger`` calls it), given the alert as
``alert=...`` (JSON: epoch, partition, deadline_at, missing producers with their predicted vote times
and last votes).

The wait is the deadlines family's asynchronous watch
(:class:`~airflow_epochs.coordination.recipes.deadlines.watch.DeadlineWatch`) on the triggerer's shared
session: it holds no thread while it waits, and it looks again at every vote of the partition, since a
vote moves a predicted deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_epochs.coordination import DEFAULT_ROOT, Verdict, validate_epoch, validate_name
from airflow_epochs.coordination.recipes.deadlines.watch import DeadlineWatch
from airflow_epochs.triggers.lifecycle import TRANSIENT, SessionUnavailable, TriggerSession, borrowed_session


def verdict_payload(verdict: Verdict) -> dict[str, Any]:
    """The trigger event's payload: where the partition stands, and the alert if it is late."""
    forecast = verdict.forecast
    return {"status": "success", "epoch": verdict.epoch, "partition": verdict.partition, "state": verdict.state,
            "deadline_at": verdict.deadline_at, "typical_at": forecast.typical_at, "late_at": forecast.late_at,
            "alert": None if verdict.alert is None else verdict.alert.to_json(), "delivered": False}


async def run_callback(path: str, kwargs: dict[str, Any], alert: dict[str, Any]) -> Any:
    """Import and call the callback at ``path`` with ``kwargs`` and ``alert``: awaited if it is a
    coroutine function (an ``AsyncCallback``), else in a thread so the triggerer's loop never blocks."""
    module, _, name = path.rpartition(".")
    callback = getattr(importlib.import_module(module), name)
    if inspect.iscoroutinefunction(callback):
        return await callback(**kwargs, alert=alert)
    return await asyncio.to_thread(callback, **kwargs, alert=alert)


class PartitionDeadlineTrigger(BaseTrigger):
    """Fire once ``partition`` of ``epoch`` is decided against its deadline (sealed in time, sealed
    late, or late); the watcher that raises the alert (or takes over the delivery of a dead one's)
    runs the callback first and marks the alert delivered.

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param partition: the partition (its deadline is declared with ``ledger.deadlines().declare``).
    :param callback_path: dotted path of the callback (``AsyncCallback(...).path``).
    :param callback_kwargs: its keyword arguments (JSON).
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param wait_for_seal: after a late partition's alert, go on watching until it seals, then record
        how late it was (default); False: fire once the alert is delivered.
    """

    def __init__(self, *, pipeline: str, epoch: int, partition: str, callback_path: str,
                 callback_kwargs: dict[str, Any] | None = None, zookeeper_conn_id: str = "zookeeper_default",
                 root: str = DEFAULT_ROOT, wait_for_seal: bool = True) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = validate_name("pipeline", pipeline)
        self.epoch = validate_epoch(epoch)
        self.partition = validate_name("partition", partition)
        self.callback_path = callback_path
        self.callback_kwargs = dict(callback_kwargs or {})
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.wait_for_seal = wait_for_seal

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("airflow_epochs.triggers.deadlines.PartitionDeadlineTrigger",
                {"pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
                 "callback_path": self.callback_path, "callback_kwargs": self.callback_kwargs,
                 "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root,
                 "wait_for_seal": self.wait_for_seal})

    # seconds a wait may go on through a lost ZooKeeper session before the task is failed
    reconnect_budget: float = 600.0

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with borrowed_session(self.zookeeper_conn_id, budget=self.reconnect_budget) as session:
                yield TriggerEvent(await self._decide(session))
        except SessionUnavailable as exc:
            yield TriggerEvent({"status": "error", "reason": exc.reason})

    async def _decide(self, session: TriggerSession) -> dict[str, Any]:
        # one owner per watcher: watchers in one triggerer share the session
        owner = f"triggerer-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        deadlines = session.ledger(self.pipeline, owner=owner, root=self.root).deadlines()
        watch = deadlines.watch(self.epoch, self.partition, until_sealed=self.wait_for_seal)
        verdict = await self._verdict(session, watch)
        delivered = False
        if verdict.deliver and verdict.alert is not None:
            self.log.info("Pipeline %s: partition %s of epoch %s is late (deadline %s); waiting for %s",
                          self.pipeline, self.partition, self.epoch, verdict.deadline_at,
                          [m.producer for m in verdict.alert.missing])
            try:
                await run_callback(self.callback_path, self.callback_kwargs, verdict.alert.to_json())
            except BaseException:
                # Not delivered: let the delivery go so that another watcher (this triggerer's
                # next one, on the same live session, or another triggerer's) delivers it.
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(deadlines.abandon, verdict.alert)
                raise
            await asyncio.to_thread(deadlines.delivered, verdict.alert)
            delivered = True
            if self.wait_for_seal and verdict.state == "late":  # then its late seal is recorded
                verdict = await self._verdict(session, deadlines.watch(self.epoch, self.partition, until_sealed=True))
        payload = verdict_payload(verdict)
        payload["delivered"] = delivered
        return payload

    async def _verdict(self, session: TriggerSession, watch: DeadlineWatch) -> Verdict:
        """The watch's verdict, waiting through a lost session for at most :attr:`reconnect_budget`."""
        loop = asyncio.get_running_loop()
        lost_since: float | None = None
        while True:
            try:
                return await watch.run(session.store, session.changed, session.wake)
            except TRANSIENT as exc:
                now = loop.time()
                lost_since = now if lost_since is None else lost_since
                if now - lost_since >= self.reconnect_budget:
                    raise
                self.log.warning("ZooKeeper went away during the deadline watch (%r); waiting for it", exc)
                await session.session_back(5.0)
