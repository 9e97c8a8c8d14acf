"""Module-level shortcuts over a ledger, for callers that hold an :class:`EpochLedger` and want a
function: each is one line over the ledger's handle (``ledger.consumer(name)``,
``ledger.backpressure()``, ``ledger.lineage(...)``). They live above the face because they take the
ledger; the recipes below it take a :class:`PipelineContext`."""

from __future__ import annotations

from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.recipes.backpressure import ConsumerState
from airflow_epochs.coordination.recipes.lineage import LineageItem


def register_consumer(
    ledger: EpochLedger, consumer: str, *, acked: int | None = None, request_id: str | None = None
) -> ConsumerState:
    """``ledger.consumer(consumer).register(...)``."""
    return ledger.consumer(consumer).register(acked=acked, request_id=request_id)


def acknowledge(ledger: EpochLedger, consumer: str, epoch: int) -> ConsumerState:
    """``ledger.consumer(consumer).acknowledge(epoch)``."""
    return ledger.consumer(consumer).acknowledge(epoch)


def unregister_consumer(ledger: EpochLedger, consumer: str, *, request_id: str | None = None) -> bool:
    """``ledger.consumer(consumer).unregister(...)``."""
    return ledger.consumer(consumer).unregister(request_id=request_id)


def consumers(ledger: EpochLedger) -> list[ConsumerState]:
    """``ledger.backpressure().consumers()``."""
    return ledger.backpressure().consumers()


def lineage_of(ledger: EpochLedger, epoch: int, partition: str) -> LineageItem | None:
    """``ledger.lineage(epoch, partition)``."""
    return ledger.lineage(epoch, partition)
