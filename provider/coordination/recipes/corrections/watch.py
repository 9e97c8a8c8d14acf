"""The asynchronous wait for the newest version of a sealed (epoch, partition): sealed, with no re-seal
of it open, and at least a given version. Watches on the epoch record, the seal and the versions node."""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.recipes.corrections.records import VersionsNode, versions_path
from airflow_epochs.coordination.state.watches import epoch_generation


@dataclass(frozen=True)
class NewestVersion:
    """The sealed (epoch, partition)'s opening and newest version."""

    generation: int
    version: int


@dataclass
class NewestVersionWatch:
    """``partition`` sealed at ``epoch`` with no re-seal of it open, its newest version at least
    ``min_version`` (1: the original seal)."""

    paths: PipelinePaths
    epoch: int
    partition: str
    min_version: int = 1

    def __post_init__(self) -> None:
        validate_epoch(self.epoch)
        validate_name("partition", self.partition)

    def on_watch(self, event: WatchedEvent) -> None:
        """Nothing to note: the check reads again."""

    async def check(self, store: NodeStore, wake: Watch) -> NewestVersion | None:
        generation = await epoch_generation(store, self.paths, self.epoch, wake)
        if generation is None or await store.exists(self.paths.seal(self.epoch, generation, self.partition),
                                                    wake) is None:
            return None
        path = versions_path(self.paths, self.epoch, self.partition)
        node = await store.get(path, wake)
        versions = None if node is None else VersionsNode.from_bytes(node.data, path=path).of_generation(generation)
        if versions is not None and versions.open is not None:
            return None  # being re-produced: wait for its seal
        latest = 1 if versions is None else versions.latest
        return None if latest < self.min_version else NewestVersion(generation, latest)
