"""A partition's predicted seal and deadline, as the Epochs page and ``airflow-epochs status`` show
them: read without writing anything (:meth:`~airflow_epochs.coordination.PartitionDeadlines.preview`)."""

from __future__ import annotations

from typing import Any

from airflow_epochs.coordination import EpochLedger


def partition_deadline(ledger: EpochLedger, epoch: int, partition: str) -> dict[str, Any]:
    """The prediction (``typical_at``, ``late_at``, ``status``: ``predicted``, ``too_little_history``,
    ``sealed``...), the deadline and where the partition stands against it (``state``; ``late`` is
    True past it unsealed or sealed after it, with ``late_by`` seconds once sealed), whether its alert
    was raised, and the missing producers with their predicted votes and last votes."""
    verdict = ledger.deadlines().preview(epoch, partition)
    forecast, alert = verdict.forecast, verdict.alert
    late_by = None
    if verdict.state == "sealed_late" and verdict.deadline_at is not None and forecast.sealed_at is not None:
        late_by = round(forecast.sealed_at - verdict.deadline_at, 3)
    return {"state": verdict.state, "status": forecast.status, "typical_at": forecast.typical_at,
            "late_at": forecast.late_at, "quantile": forecast.quantile, "deadline_at": verdict.deadline_at,
            "late": verdict.state in ("late", "sealed_late"), "late_by": late_by, "alerted": alert is not None,
            "missing": [m.to_json() for m in forecast.missing]}
