"""PartitionsSealedTrigger: fires once every named partition of an epoch is sealed (alignment)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.state.watches import SealsWatch, epoch_compacted, epoch_generation
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice

__all__ = ["PartitionsSealedTrigger", "epoch_compacted", "epoch_generation"]


class PartitionsSealedTrigger(ZooKeeperWatchTrigger):
    """Wait until every partition in ``partitions`` is sealed at ``epoch``
    (:class:`~airflow_epochs.coordination.state.watches.SealsWatch`: an exists-watch on each missing
    seal, and one on the epoch record, which catches a rollback).

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param partitions: the partitions to align on.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param timeout_at: unix time at which it fires ``{"status": "timeout"}`` (the sensor's timeout).
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        partitions: Sequence[str],
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
        timeout_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = validate_name("pipeline", pipeline)
        self.epoch = validate_epoch(epoch)
        self.partitions = [validate_name("partition", p) for p in partitions]
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at
        self.watch = SealsWatch(PipelinePaths(pipeline, root), self.epoch, self.partitions)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.seals.PartitionsSealedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "partitions": list(self.partitions),
             "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root, "timeout_at": self.timeout_at},
        )

    def on_watch(self, event: WatchedEvent) -> None:
        self.watch.on_watch(event)

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        found = await self.watch.check(zk, wake)
        if found is None:
            return None
        payload: dict[str, Any] = {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch,
                                   "seals": {p: {"generation": found.generation, "zxid": found.zxids[p]}
                                             for p in self.partitions}}
        if found.compacted:
            payload["compacted"] = True
        return payload

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = f"partition(s) {', '.join(self.partitions)} of pipeline {self.pipeline!r} at epoch {self.epoch}"
        return await pipeline_notice(zk, PipelinePaths(self.pipeline, self.root), epoch=self.epoch,
                                     waiting_for=what, first=first)
