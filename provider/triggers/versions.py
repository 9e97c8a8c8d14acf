"""NewestVersionTrigger: fires once a partition of an epoch is sealed and no re-seal of it is open (its
newest version is sealed), optionally at least a given version."""

from __future__ import annotations

from typing import Any

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.recipes.corrections.records import VersionsNode, versions_path
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice
from airflow_epochs.triggers.seals import epoch_generation


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
        self.paths = PipelinePaths(pipeline, root)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.versions.NewestVersionTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
             "min_version": self.min_version, "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root,
             "timeout_at": self.timeout_at},
        )

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = (f"version {self.min_version} of partition {self.partition!r} of pipeline {self.pipeline!r} at "
                f"epoch {self.epoch}")
        return await pipeline_notice(zk, self.paths, root=self.root, epoch=self.epoch, waiting_for=what, first=first)

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        generation = await epoch_generation(zk, self.paths, self.epoch, wake)
        if generation is None or await zk.exists(self.paths.seal(self.epoch, generation, self.partition),
                                                 wake) is None:
            return None
        path = versions_path(self.paths, self.epoch, self.partition)
        node = await zk.get(path, wake)
        versions = None if node is None else VersionsNode.from_bytes(node[0], path=path).of_generation(generation)
        if versions is not None and versions.open is not None:
            return None  # being re-produced: wait for its seal
        latest = 1 if versions is None else versions.latest
        if latest < self.min_version:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
                "generation": generation, "version": latest}
