"""ConsumersCaughtUpTrigger: fires once every registered consumer has acknowledged an epoch."""

from __future__ import annotations

import time
from typing import Any, Unpack

from airflow_epochs.coordination import PipelinePaths
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.recipes.backpressure.watch import ConsumersWatch
from airflow_epochs.triggers.base import EpochArguments, EpochWatchTrigger


class ConsumersCaughtUpTrigger(EpochWatchTrigger):
    """Wait until each consumer registered on ``pipeline`` acknowledged ``epoch`` (or left).

    The check is the backpressure family's watch
    (:class:`~airflow_epochs.coordination.recipes.backpressure.watch.ConsumersWatch`): it wakes on the
    acknowledgement itself, not on a polling interval. The other arguments are
    :class:`~airflow_epochs.triggers.base.EpochWatchTrigger`'s.

    :param deadline: wall-clock time (seconds since the Unix epoch) at which it fires
        ``{"status": "timeout"}`` instead. Every event carries it back: ``airflow dags test`` resumes
        a deferred task with the event alone, without the task's own resume arguments.
    """

    def __init__(self, *, deadline: float | None = None, **epoch: Unpack[EpochArguments]) -> None:
        super().__init__(**epoch)
        self.deadline = deadline
        self.give_up_after = None if deadline is None else max(0.0, deadline - time.time())
        self.watch = ConsumersWatch(PipelinePaths(self.pipeline, self.root), self.epoch)

    def arguments(self) -> dict[str, Any]:
        return {"deadline": self.deadline}

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        if await self.watch.check(zk, wake) is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "deadline": self.deadline}

    def timeout_payload(self) -> dict[str, Any]:
        return {**super().timeout_payload(), "pipeline": self.pipeline, "epoch": self.epoch,
                "deadline": self.deadline}
