"""NewestVersionTrigger: fires once a partition of an epoch is sealed and no re-seal of it is open (its
newest version is sealed), optionally at least a given version."""

from __future__ import annotations

from typing import Any, Unpack

from airflow_epochs.coordination import PipelinePaths, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.recipes.corrections.watch import NewestVersionWatch
from airflow_epochs.triggers.base import EpochArguments, EpochWatchTrigger


class NewestVersionTrigger(EpochWatchTrigger):
    """Wait until ``partition`` is sealed at ``epoch`` with no re-seal of it open, and its newest sealed
    version is at least ``min_version``. Watches on the epoch record, the seal and the versions node; the
    other arguments are :class:`~airflow_epochs.triggers.base.EpochWatchTrigger`'s.

    :param partition: the partition.
    :param min_version: the lowest version that counts (1: the original seal).
    """

    def __init__(self, *, partition: str, min_version: int = 1, **epoch: Unpack[EpochArguments]) -> None:
        super().__init__(**epoch)
        self.partition = validate_name("partition", partition)
        self.min_version = int(min_version)
        self.watch = NewestVersionWatch(PipelinePaths(self.pipeline, self.root), self.epoch, self.partition,
                                        self.min_version)

    def arguments(self) -> dict[str, Any]:
        return {"partition": self.partition, "min_version": self.min_version}

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        found = await self.watch.check(zk, wake)
        if found is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "partition": self.partition,
                "generation": found.generation, "version": found.version}

    def waiting_for(self) -> str:
        return (f"version {self.min_version} of partition {self.partition!r} of pipeline {self.pipeline!r} at "
                f"epoch {self.epoch}")
