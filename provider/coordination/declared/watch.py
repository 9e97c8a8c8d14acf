"""What a declared partition's asset delivery reads asynchronously: the partition key the producers
staged with their votes, and whether a consumer has acknowledged the previous key (so that the next
one goes out only once the previous key's run exists)."""

from __future__ import annotations

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.declared.staging import decode_staged_key, staged_epoch_path
from airflow_epochs.coordination.recipes.backpressure.watch import acknowledged


async def staged_key(store: NodeStore, paths: PipelinePaths, epoch: int) -> str | None:
    """The partition key staged for ``epoch`` by its declared producers, or None."""
    staged = await store.get(staged_epoch_path(paths, epoch))
    return decode_staged_key(staged.data) if staged is not None else None


async def holds_back(store: NodeStore, paths: PipelinePaths, consumer: str, epoch: int, wake: Watch, *,
                     delivered_before: bool) -> bool:
    """Whether the seal of ``epoch`` waits for ``consumer``: it goes out once the consumer acknowledged
    ``epoch - 1``. A consumer not registered yet has received nothing: only the first key goes out
    (``delivered_before`` False), and nothing more until its run registers it by acknowledging that key.
    ``wake`` hears of the registration and of each acknowledgement."""
    acked = await acknowledged(store, paths, consumer, wake)
    if acked is None:
        return delivered_before
    return acked < epoch - 1
