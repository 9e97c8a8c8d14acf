"""The kernel's asynchronous watches: the frontier reaching an epoch, and partitions of an epoch being
sealed (the epoch's own state, as a trigger waits for it).

Each watch reads through a :class:`~airflow_epochs.coordination.base.aio.NodeStore` and leaves one-shot
watches (``wake``); ``on_watch`` sees what a fired watch says first, so a watch that already knows
enough (a seal node was created) answers without reading. The families' watches live in their own
folders (``recipes/<family>/watch.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.protocol.states import EventType, WatchedEvent

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.state.roots import pipeline_names_of
from airflow_epochs.coordination.wire.nodes import EpochNode, FrontierNode, PipelineRecord

__all__ = ["FAR_PAST_FRONTIER", "MAX_NAMED", "FrontierWatch", "SealsFound", "SealsWatch", "epoch_compacted",
           "epoch_generation", "pipeline_notice"]

FAR_PAST_FRONTIER = 2  # an awaited epoch this many epochs past the frontier (or more) is said
MAX_NAMED = 12  # pipelines a notice names (a root may hold thousands)


async def epoch_generation(store: NodeStore, paths: PipelinePaths, epoch: int, wake: Watch | None) -> int | None:
    """The epoch's current opening, or None while it is not opened (or rolled back and not reopened);
    with ``wake``, a watch on the epoch record hears of an opening or a rollback."""
    path = paths.epoch(epoch)
    node = await store.get(path, wake)
    if node is None:
        return None
    record = EpochNode.from_bytes(node.data, path=path)
    return None if record.state == "rolled_back" else record.generation


async def epoch_compacted(store: NodeStore, paths: PipelinePaths, epoch: int) -> bool:
    """Whether ``epoch`` is compacted (sealed, and gone from ZooKeeper: with an archive's default window
    that happens as soon as the next epoch opens), as the pipeline record says."""
    node = await store.get(paths.base, None)
    if node is None:
        return False
    record = PipelineRecord.from_bytes(node.data, int(node.stat.version), path=paths.base)
    return record.first_epoch <= epoch <= record.compacted_through


async def pipeline_exists(store: NodeStore, paths: PipelinePaths) -> bool:
    """Whether the pipeline's record exists (one read, no watch)."""
    return await store.exists(paths.base) is not None


@dataclass
class FrontierWatch:
    """The frontier reaching ``epoch``: the frontier's value is the news, so it is read; a missing
    node leaves a creation watch (a pipeline that does not exist yet)."""

    paths: PipelinePaths
    epoch: int

    def __post_init__(self) -> None:
        validate_epoch(self.epoch)

    def on_watch(self, event: WatchedEvent) -> None:
        """Nothing to note: the check reads the frontier again."""

    async def check(self, store: NodeStore, wake: Watch) -> int | None:
        """The frontier once it is at least ``epoch``, else None (``wake`` is left on it)."""
        node = await store.get(self.paths.frontier, wake)
        if node is None:
            return None
        frontier = FrontierNode.from_bytes(node.data, path=self.paths.frontier).epoch
        return frontier if frontier >= self.epoch else None


@dataclass(frozen=True)
class SealsFound:
    """Every partition waited for is sealed: in which opening, each seal's creation zxid; or the epoch
    was compacted (every partition of it is sealed, and the details are in the archive)."""

    generation: int | None
    zxids: dict[str, int | None]
    compacted: bool = False


class SealsWatch:
    """Every partition of ``partitions`` sealed at ``epoch``: an exists-watch on each missing seal (a
    "created" event says it is sealed, and nothing is read), and a watch on the epoch record, which
    catches a rollback (the seals of the new opening are then awaited).

    :param paths: the pipeline's paths.
    :param epoch: the epoch.
    :param partitions: the partitions to align on.
    """

    def __init__(self, paths: PipelinePaths, epoch: int, partitions: Sequence[str]) -> None:
        self.paths = paths
        self.epoch = validate_epoch(epoch)
        self.partitions = [validate_name("partition", p) for p in partitions]
        self._generation: int | None = None
        self._sealed: dict[str, int | None] = {}  # partition -> seal czxid (None: heard of, not read)

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

    async def check(self, store: NodeStore, wake: Watch) -> SealsFound | None:
        """What was found once every partition is sealed, else None (``wake`` is left where it waits)."""
        if self._generation is None:
            self._generation = await epoch_generation(store, self.paths, self.epoch, wake)
            if self._generation is None:
                if await epoch_compacted(store, self.paths, self.epoch):
                    return SealsFound(None, dict.fromkeys(self.partitions), compacted=True)
                return None
        generation = self._generation
        for partition in self.partitions:
            if partition in self._sealed:
                continue
            stat = await store.exists(self.paths.seal(self.epoch, generation, partition), wake)
            if stat is None:
                return None
            self._sealed[partition] = int(stat.czxid)
        return SealsFound(generation, {p: self._sealed[p] for p in self.partitions})


async def pipeline_notice(store: NodeStore, paths: PipelinePaths, *, epoch: int, waiting_for: str,
                          first: bool = False) -> str | None:
    """One line on why ``waiting_for`` may wait long, or None when nothing looks wrong: the pipeline is
    missing (said from the ``first`` look on, naming the pipelines that do exist), or ``epoch`` is far
    past its frontier (said from the second look on: catch-up runs wait a few epochs ahead as a matter
    of course). A wait is not failed for either: a downstream DAG may start before its pipeline exists."""
    if await store.exists(paths.base) is None:
        others = await pipeline_names_of(store, paths.root)
        there = (f"pipelines there: {', '.join(others[:MAX_NAMED])}{' ...' if len(others) > MAX_NAMED else ''}"
                 if others else "no pipeline exists there yet")
        return (f"still waiting for {waiting_for}: pipeline {paths.pipeline!r} does not exist under {paths.root} "
                f"({there}); a typo in the name waits until the task's timeout")
    node = await store.get(paths.frontier)
    if node is None or first:
        return None
    frontier = FrontierNode.from_bytes(node.data, path=paths.frontier).epoch
    if epoch - frontier >= FAR_PAST_FRONTIER:
        return (f"still waiting for {waiting_for}: the pipeline's frontier is at epoch {frontier}, {epoch - frontier} "
                f"epochs before epoch {epoch}")
    return None
