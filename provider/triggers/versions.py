"""NewestVersionTrigger: fires once a partition of an epoch is sealed and no re-seal of it is open (its
newest version is sealed), optionally at least a given version."""

from __future__ import annotations

from typing import Any

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.recipes.corrections.watch import NewestVersionWatch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice


class NewestVersionTrigger(ZooKeeperWatchTrigger):
    """Wait until ``partition`` is sealed at ``epoch`` with no re-seal of it open, and its newest sealed
    version is at least ``min_version``. Watches on the epoch record, the seal and the versions node.

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param partition: the partition.
    :param min_version: the lowest version that counts (1: the original seal).
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    :param timeout_at: unix time at which it fires ``{"status": "timeout"}`` (the sensor's timeout).
    """

    def __init__(self, *, pipeline: str, epoch: int, partition: str, min_version: int = 1,
                 zookeeper_conn_id: str = "zookeeper_default", root: str = DEFAULT_ROOT,
                 timeout_at: float | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.partition = validate_name("partition", partition)
        self.min_version = int(min_version)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at
        self.watch = NewestVersionWatch(PipelinePaths(pipeline, root), self.epoch, self.partition, self.min_version)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.versions.NewestVersionTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
             "min_version": self.min_version, "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root,
             "timeout_at": self.timeout_at},
        )

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        found = await self.watch.check(zk, wake)
        if found is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
                "generation": found.generation, "version": found.version}

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = (f"version {self.min_version} of partition {self.partition!r} of pipeline {self.pipeline!r} at "
                f"epoch {self.epoch}")
        return await pipeline_notice(zk, PipelinePaths(self.pipeline, self.root), epoch=self.epoch,
                                     waiting_for=what, first=first)
