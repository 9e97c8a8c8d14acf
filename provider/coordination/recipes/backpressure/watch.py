"""The asynchronous wait until every registered consumer has acknowledged an epoch (or left): a watch
on the consumers' folder (one joining or leaving) and on each consumer's node (its acknowledgement),
so the wait wakes on the acknowledgement itself, not on a polling interval."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.wire.nodes import ConsumerNode


@dataclass
class ConsumersWatch:
    """Every consumer of the pipeline at ``epoch`` or beyond."""

    paths: PipelinePaths
    epoch: int

    def __post_init__(self) -> None:
        validate_epoch(self.epoch)

    def on_watch(self, event: WatchedEvent) -> None:
        """Nothing to note: the check reads the acknowledgements again."""

    async def check(self, store: NodeStore, wake: Watch) -> bool | None:
        """True once each registered consumer acknowledged ``epoch``, else None."""
        names = await store.children(self.paths.consumers, wake) or []
        nodes = await asyncio.gather(*(store.get(self.paths.consumer(name), wake) for name in names))
        for name, node in zip(names, nodes, strict=True):
            if node is None:  # left meanwhile: the folder's watch covers it
                continue
            if ConsumerNode.from_bytes(node.data, path=self.paths.consumer(name)).acked < self.epoch:
                return None
        return True


async def acknowledged(store: NodeStore, paths: PipelinePaths, consumer: str, wake: Watch | None) -> int | None:
    """The epoch ``consumer`` acknowledged, or None while it is not registered (``wake`` hears of its
    registration, and of each acknowledgement)."""
    path = paths.consumer(consumer)
    if await store.exists(path, wake) is None:
        return None
    node = await store.get(path, wake)
    return None if node is None else ConsumerNode.from_bytes(node.data, path=path).acked
