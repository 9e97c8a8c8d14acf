"""ConsumersCaughtUpTrigger: fires once every registered consumer has acknowledged an epoch."""

from __future__ import annotations

import time
from typing import Any

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.recipes.backpressure.watch import ConsumersWatch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger


class ConsumersCaughtUpTrigger(ZooKeeperWatchTrigger):
    """Wait until each consumer registered on ``pipeline`` acknowledged ``epoch`` (or left).

    The check is the backpressure family's watch
    (:class:`~airflow_epochs.coordination.recipes.backpressure.watch.ConsumersWatch`): it wakes on the
    acknowledgement itself, not on a polling interval.

    :param pipeline: pipeline name.
    :param epoch: the epoch every consumer must have acknowledged.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param deadline: wall-clock time (seconds since the Unix epoch) at which it fires
        ``{"status": "timeout"}`` instead. Every event carries it back: ``airflow dags test`` resumes
        a deferred task with the event alone, without the task's own resume arguments.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
        deadline: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.deadline = deadline
        self.give_up_after = None if deadline is None else max(0.0, deadline - time.time())
        self.watch = ConsumersWatch(PipelinePaths(pipeline, root), self.epoch)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.backpressure.ConsumersCaughtUpTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "zookeeper_conn_id": self.zookeeper_conn_id,
             "root": self.root, "deadline": self.deadline},
        )

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        if await self.watch.check(zk, wake) is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "deadline": self.deadline}

    def timeout_payload(self) -> dict[str, Any]:
        return {**super().timeout_payload(), "pipeline": self.pipeline, "epoch": self.epoch,
                "deadline": self.deadline}
