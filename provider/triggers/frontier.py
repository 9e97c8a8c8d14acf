"""FrontierReachedTrigger: fires once a pipeline's frontier reaches an epoch."""

from __future__ import annotations

from typing import Any

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.state.watches import FrontierWatch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice


class FrontierReachedTrigger(ZooKeeperWatchTrigger):
    """Wait until ``pipeline``'s frontier is at least ``epoch`` (a watch on the frontier node).

    :param pipeline: pipeline name.
    :param epoch: the epoch the frontier must reach.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param timeout_at: unix time at which it fires ``{"status": "timeout"}`` (the sensor's timeout).
    :param give_up_after: seconds after which it fires ``{"status": "timeout"}`` instead.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
        give_up_after: float | None = None,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.give_up_after = give_up_after
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at
        self.watch = FrontierWatch(PipelinePaths(pipeline, root), self.epoch)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.frontier.FrontierReachedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "zookeeper_conn_id": self.zookeeper_conn_id,
             "root": self.root, "give_up_after": self.give_up_after, "timeout_at": self.timeout_at},
        )

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        frontier = await self.watch.check(zk, wake)
        if frontier is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "frontier": frontier}

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = f"the frontier of pipeline {self.pipeline!r} to reach epoch {self.epoch}"
        return await pipeline_notice(zk, PipelinePaths(self.pipeline, self.root), epoch=self.epoch,
                                     waiting_for=what, first=first)
