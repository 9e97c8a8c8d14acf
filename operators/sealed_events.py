"""The asset events of an epoch's close: one :class:`SealedPartitionEvent` a sealed partition, written by
the close task (``CloseEpochOperator``) and by a group's last task when its stages are inline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination import Attempt, SealInfo
from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent

if TYPE_CHECKING:
    from airflow.sdk import Context


def emit_sealed_events(context: Context, attempt: Attempt, assets: Mapping[str, Any],
                       seals: Mapping[str, SealInfo | None]) -> None:
    """Add ``attempt``'s epoch as a partition of each partition's asset in ``assets`` (partition -> asset),
    with the seal's event record as the event's ``extra`` (the attempt's own token when the seal is not read).

    :param seals: each partition's seal as read after the close (None if it could not be read).
    """
    events = context["outlet_events"]
    for partition, asset in assets.items():
        seal = seals[partition]
        accessor = events[asset]
        accessor.add_partitions(str(attempt.epoch))
        accessor.extra.update(SealedPartitionEvent(
            attempt.pipeline, partition, attempt.epoch, attempt.generation,
            seal.attempt if seal else attempt.token, seal.zxid if seal else None).to_extra())
