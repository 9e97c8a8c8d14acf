"""PartitionsSealedTrigger: fires once every named partition of an epoch is sealed (alignment)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import PipelinePaths, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch
from airflow_epochs.coordination.state.watches import SealsWatch, epoch_compacted, epoch_generation
from airflow_epochs.triggers.base import EpochArguments, EpochWatchTrigger

__all__ = ["PartitionsSealedTrigger", "epoch_compacted", "epoch_generation"]


class PartitionsSealedTrigger(EpochWatchTrigger):
    """Wait until every partition in ``partitions`` is sealed at ``epoch``
    (:class:`~airflow_epochs.coordination.state.watches.SealsWatch`: an exists-watch on each missing
    seal, and one on the epoch record, which catches a rollback); the other arguments are
    :class:`~airflow_epochs.triggers.base.EpochWatchTrigger`'s.

    :param partitions: the partitions to align on.
    """

    def __init__(self, *, partitions: Sequence[str], **epoch: Unpack[EpochArguments]) -> None:
        super().__init__(**epoch)
        self.partitions = [validate_name("partition", p) for p in partitions]
        self.watch = SealsWatch(PipelinePaths(self.pipeline, self.root), self.epoch, self.partitions)

    def arguments(self) -> dict[str, Any]:
        return {"partitions": list(self.partitions)}

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

    def waiting_for(self) -> str:
        return f"partition(s) {', '.join(self.partitions)} of pipeline {self.pipeline!r} at epoch {self.epoch}"
