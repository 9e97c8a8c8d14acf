"""PartitionsSealedTrigger: fires once every named partition of an epoch is sealed (alignment)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.protocol.states import EventType, WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.wire.nodes import EpochNode, PipelineRecord
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.notices import pipeline_notice


async def epoch_generation(zk: AsyncZooKeeper, paths: PipelinePaths, epoch: int, wake: Watch | None) -> int | None:
    """The epoch's current opening, or None while it is not opened (or rolled back and not reopened);
    with ``wake``, a watch on the epoch record hears of an opening or a rollback."""
    path = paths.epoch(epoch)
    node = await zk.get(path, wake)
    if node is None:
        return None
    record = EpochNode.from_bytes(node[0], path=path)
    return None if record.state == "rolled_back" else record.generation


async def epoch_compacted(zk: AsyncZooKeeper, paths: PipelinePaths, epoch: int) -> bool:
    """Whether ``epoch`` is compacted (sealed, and gone from ZooKeeper: with an archive's default window
    that happens as soon as the next epoch opens), as the pipeline record says."""
    node = await zk.get(paths.base, None)
    if node is None:
        return False
    record = PipelineRecord.from_bytes(node[0], int(node[1].version), path=paths.base)
    return record.first_epoch <= epoch <= record.compacted_through


class PartitionsSealedTrigger(ZooKeeperWatchTrigger):
    """Wait until every partition in ``partitions`` is sealed at ``epoch``.

    An exists-watch on each missing seal; when one fires with "created", that partition is known to be
    sealed and nothing is read. A watch on the epoch record catches a rollback (a new opening), after
    which the seals of the new opening are awaited.

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
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.partitions = [validate_name("partition", p) for p in partitions]
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.timeout_at = timeout_at
        self.paths = PipelinePaths(pipeline, root)
        self._generation: int | None = None
        self._sealed: dict[str, int | None] = {}  # partition -> seal czxid (None: heard of, not read)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.seals.PartitionsSealedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "partitions": list(self.partitions),
             "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root,
             "timeout_at": self.timeout_at},
        )

    async def notice(self, zk: AsyncZooKeeper, *, first: bool) -> str | None:
        what = f"partition(s) {', '.join(self.partitions)} of pipeline {self.pipeline!r} at epoch {self.epoch}"
        return await pipeline_notice(zk, self.paths, root=self.root, epoch=self.epoch, waiting_for=what, first=first)

    def on_watch(self, event: WatchedEvent) -> None:
        if self._generation is None:
            return
        if event.path == self.paths.epoch(self.epoch):
            # The record changed: opened, reopened, rolled back, or sealed. Seals heard of already
            # (ZooKeeper fires a transaction's watches in the order of its ops: a seal before the
            # epoch's own seal) are kept when they complete the wait; otherwise look again.
            if set(self._sealed) != set(self.partitions):
                self._generation = None
                self._sealed.clear()
            return
        for partition in self.partitions:
            if event.path == self.paths.seal(self.epoch, self._generation, partition) \
                    and event.type == EventType.CREATED:
                self._sealed.setdefault(partition, None)

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        if self._generation is None:
            self._generation = await epoch_generation(zk, self.paths, self.epoch, wake)
            if self._generation is None:
                if await epoch_compacted(zk, self.paths, self.epoch):  # every partition of it is sealed
                    return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "compacted": True,
                            "seals": {p: {"generation": None, "zxid": None} for p in self.partitions}}
                return None
        generation = self._generation
        for partition in self.partitions:
            if partition in self._sealed:
                continue
            stat = await zk.exists(self.paths.seal(self.epoch, generation, partition), wake)
            if stat is None:
                return None
            self._sealed[partition] = int(stat.czxid)
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch,
                "seals": {p: {"generation": generation, "zxid": self._sealed[p]} for p in self.partitions}}
