"""BarrierReleasedTrigger: fires once a barrier is released, failed, or reports stragglers."""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.coordination import DEFAULT_ROOT, validate_epoch, validate_name
from airflow_epochs.coordination.barriers import Barrier, BarrierOutcome
from airflow_epochs.triggers.base import Wake, ZooKeeperWatchTrigger


def outcome_payload(outcome: BarrierOutcome) -> dict[str, Any]:
    return {"decision": outcome.decision, "released": outcome.released, "arrived": list(outcome.arrived),
            "late": list(outcome.late)}


class BarrierReleasedTrigger(ZooKeeperWatchTrigger):
    """Wait for a barrier's decision: one watch on its release node, plus a timer for its deadline
    (at which the straggler policy is applied, once, by whoever gets there first).

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param barrier: barrier name.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        barrier: str,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
    ) -> None:
        super().__init__()
        self.pipeline = validate_name("pipeline", pipeline)
        self.epoch = validate_epoch(epoch)
        self.barrier = validate_name("barrier", barrier)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self._policy_outcome: BarrierOutcome | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.barriers.BarrierReleasedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "barrier": self.barrier,
             "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root},
        )

    def _barrier(self, client: KazooClient) -> Barrier:
        return Barrier(client, self.pipeline, self.epoch, self.barrier, root=self.root)

    def check(self, client: KazooClient, wake: Wake) -> dict[str, Any] | None:
        barrier = self._barrier(client)
        outcome = self._policy_outcome
        if outcome is None and client.exists(barrier._child("release"), watch=wake) is not None:
            outcome = barrier.outcome()
        if outcome is not None:
            return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "barrier": self.barrier,
                    **outcome_payload(outcome)}
        deadline = barrier._doc()[0]["deadline"]
        self.tick_seconds = max(0.05, deadline - time.time())
        return None

    def on_tick(self, client: KazooClient) -> None:
        barrier = self._barrier(client)
        if time.time() >= barrier._doc()[0]["deadline"]:
            self._policy_outcome = barrier._apply_policy()
