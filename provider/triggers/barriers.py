"""BarrierReleasedTrigger: fires once a barrier is released, failed, or reports stragglers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kazoo.protocol.states import EventType, WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, EpochNotOpen, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.recipes.barriers.barrier import Barrier, BarrierOutcome
from airflow_epochs.coordination.recipes.barriers.records import BarrierNode, BarrierPaths, late_text
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice
from airflow_epochs.triggers.seals import epoch_generation

# Near the deadline another process's clock may already have let a policy decide: read, don't infer.
_SKEW_MARGIN = 1.0


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


class BarrierReleasedTrigger(ZooKeeperWatchTrigger):
    """Wait for a barrier's decision: one exists-watch on its release node (a release before the
    deadline is "everyone arrived": nothing is read when it fires), plus a timer for its deadline, at
    which the straggler policy is applied, once, by whoever gets there first.

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param barrier: barrier name.
    :param timeout_at: unix time at which it fires ``{"status": "timeout"}`` (the sensor's timeout).
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        barrier: str,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = validate_name("pipeline", pipeline)
        self.epoch = validate_epoch(epoch)
        self.barrier = validate_name("barrier", barrier)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at
        self.paths = PipelinePaths(pipeline, root)
        self._generation: int | None = None
        self._deadline: float | None = None
        self._released = False
        self._decided: BarrierOutcome | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.barriers.BarrierReleasedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "barrier": self.barrier,
             "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root,
             "timeout_at": self.timeout_at},
        )

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = f"barrier {self.barrier!r} of pipeline {self.pipeline!r} at epoch {self.epoch}"
        return await pipeline_notice(zk, self.paths, root=self.root, epoch=self.epoch, waiting_for=what, first=first)

    def _payload(self, outcome: BarrierOutcome) -> dict[str, Any]:
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "barrier": self.barrier,
                **outcome_payload(outcome)}

    def on_watch(self, event: WatchedEvent) -> None:
        if self._generation is not None and event.type == EventType.CREATED \
                and event.path == BarrierPaths(self.paths, self.epoch, self._generation, self.barrier).release:
            self._released = True

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        if self._decided is not None:
            return self._payload(self._decided)
        if self._generation is None:
            self._generation = await epoch_generation(zk, self.paths, self.epoch, None)
            if self._generation is None:
                # gone from ZooKeeper: an epoch compacted into its archive still has its decisions there
                archived = await asyncio.to_thread(self._decision_if_archived, zk)
                if archived is None:
                    raise _not_open(self.pipeline, self.epoch)
                return self._payload(archived)
        if self._deadline is None:
            path = BarrierPaths(self.paths, self.epoch, self._generation, self.barrier).barrier
            node = await zk.get(path, wake)  # the barrier may be declared later
            if node is None:
                return None
            self._deadline = BarrierNode.from_bytes(node[0], path=path).deadline
        release = BarrierPaths(self.paths, self.epoch, self._generation, self.barrier).release
        if not self._released and await zk.exists(release, wake) is not None:
            self._released = True
        if self._released:
            if time.time() < self._deadline - _SKEW_MARGIN:
                return self._payload(BarrierOutcome("all", True, None, ()))
            outcome = await asyncio.to_thread(self._barrier(zk).outcome)
            if outcome is not None:
                return self._payload(outcome)
        self.tick_seconds = max(0.05, self._deadline - time.time())
        return None

    async def on_tick(self, zk: AsyncZooKeeper) -> None:
        if self._deadline is not None and time.time() >= self._deadline:
            # the rare path: the policy reads who is late and records its decision
            self._decided = await asyncio.to_thread(self._barrier(zk).apply_policy)

    def _decision_if_archived(self, zk: AsyncZooKeeper) -> BarrierOutcome | None:
        try:
            return self._barrier(zk).outcome()
        except EpochNotOpen:
            return None

    def _barrier(self, zk: AsyncZooKeeper) -> Barrier:
        return zk.ledger(self.pipeline, root=self.root).barrier(self.epoch, self.barrier, generation=self._generation)


def _not_open(pipeline: str, epoch: int) -> Exception:
    return EpochNotOpen(f"epoch {epoch} of {pipeline!r} is not open: it has no barriers")
