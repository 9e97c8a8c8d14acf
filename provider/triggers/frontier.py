"""FrontierReachedTrigger: fires once a pipeline's frontier reaches an epoch."""

from __future__ import annotations

from typing import Any, Unpack

from airflow_epochs.coordination import PipelinePaths
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.state.watches import FrontierWatch
from airflow_epochs.triggers.base import EpochArguments, EpochWatchTrigger


class FrontierReachedTrigger(EpochWatchTrigger):
    """Wait until ``pipeline``'s frontier is at least ``epoch`` (a watch on the frontier node); the
    other arguments are :class:`~airflow_epochs.triggers.base.EpochWatchTrigger`'s.

    :param give_up_after: seconds after which it fires ``{"status": "timeout"}`` instead.
    """

    def __init__(self, *, give_up_after: float | None = None, **epoch: Unpack[EpochArguments]) -> None:
        super().__init__(**epoch)
        self.give_up_after = give_up_after
        self.watch = FrontierWatch(PipelinePaths(self.pipeline, self.root), self.epoch)

    def arguments(self) -> dict[str, Any]:
        return {"give_up_after": self.give_up_after}

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        frontier = await self.watch.check(zk, wake)
        if frontier is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "frontier": frontier}

    def waiting_for(self) -> str:
        return f"the frontier of pipeline {self.pipeline!r} to reach epoch {self.epoch}"
