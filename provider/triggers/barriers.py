"""BarrierReleasedTrigger: fires once a barrier is released, failed, or reports stragglers."""

from __future__ import annotations

from typing import Any, Unpack

from airflow.sdk.exceptions import AirflowFailException
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.recipes.barriers.records import BarrierOutcome, late_text
from airflow_epochs.coordination.recipes.barriers.watch import BarrierWatch
from airflow_epochs.triggers.base import EpochArguments, EpochWatchTrigger
from airflow_epochs.triggers.lifecycle import session_ledger


def outcome_payload(outcome: BarrierOutcome) -> dict[str, Any]:
    """A barrier's decision as the trigger's event payload (and the waiting task's input)."""
    return {"decision": outcome.decision, "released": outcome.released, "arrived": outcome.arrived,
            "late": list(outcome.late), "late_count": outcome.stragglers}


def barrier_result(event: dict[str, Any]) -> dict[str, Any]:
    """The task result of a barrier decision; a failed barrier or reported stragglers fail the task."""
    where = f"barrier {event['barrier']!r} of {event['pipeline']!r} epoch {event['epoch']}"
    # an event from before the count existed names every straggler
    late_count = int(event.get("late_count", len(event["late"])))
    stragglers = late_text(tuple(event["late"]), late_count)
    if event["decision"] == "failed":
        raise AirflowFailException(f"{where} failed: {stragglers} did not arrive in time")
    if event["decision"] == "rerun":
        raise AirflowFailException(f"{where}: stragglers {stragglers} must be re-run (rerun policy)")
    return {"decision": event["decision"], "arrived": event["arrived"], "late": event["late"],
            "late_count": late_count}


class BarrierReleasedTrigger(EpochWatchTrigger):
    """Wait for a barrier's decision: the barriers family's watch
    (:class:`~airflow_epochs.coordination.recipes.barriers.watch.BarrierWatch`: one exists-watch on the
    release node), plus a timer for its deadline, at which the straggler policy is applied, once, by
    whoever gets there first. The other arguments are :class:`~airflow_epochs.triggers.base.EpochWatchTrigger`'s.

    :param barrier: barrier name.
    """

    def __init__(self, *, barrier: str, **epoch: Unpack[EpochArguments]) -> None:
        super().__init__(**epoch)
        self.barrier = validate_name("barrier", barrier)
        self.watch: BarrierWatch | None = None  # on the store's client, at the first check

    def arguments(self) -> dict[str, Any]:
        return {"barrier": self.barrier}

    def _payload(self, outcome: BarrierOutcome) -> dict[str, Any]:
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "barrier": self.barrier,
                **outcome_payload(outcome)}

    def on_watch(self, event: WatchedEvent) -> None:
        if self.watch is not None:
            self.watch.on_watch(event)

    def _watch(self, zk: AsyncZooKeeper) -> BarrierWatch:
        if self.watch is None:
            ledger = session_ledger(zk.client, self.pipeline, root=self.root)
            self.watch = ledger.barrier(self.epoch, self.barrier).watch()
        return self.watch

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        watch = self._watch(zk)
        outcome = await watch.check(zk, wake)
        if outcome is not None:
            return self._payload(outcome)
        self.tick_seconds = watch.seconds_to_deadline()
        return None

    async def on_tick(self, zk: AsyncZooKeeper) -> None:
        await self._watch(zk).at_deadline()

    def waiting_for(self) -> str:
        return f"barrier {self.barrier!r} of pipeline {self.pipeline!r} at epoch {self.epoch}"
