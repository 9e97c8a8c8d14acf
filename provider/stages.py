"""What the epoch stages of a DAG share, below both the operators and the sensors: which task opened
the epoch of the EpochGroup being defined, templated epoch numbers, and the task result of a barrier
decision. Operators and sensors import this module; it imports neither."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import validate_epoch

_OPEN_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("airflow_epochs_open_task", default=None)


def current_open_task_id() -> str | None:
    """The open task of the innermost EpochGroup being defined, if any (used at DAG parse time)."""
    return _OPEN_TASK.get()


@contextmanager
def open_task_scope(task_id: str) -> Iterator[None]:
    """Within the block, epoch stages default to ``task_id`` as the task that opened their epoch."""
    token = _OPEN_TASK.set(task_id)
    try:
        yield
    finally:
        _OPEN_TASK.reset(token)


def templated_epoch(value: Any) -> int:
    """Epochs arrive templated (strings): turn them into validated integers."""
    try:
        return validate_epoch(int(str(value).strip()))
    except ValueError as exc:  # bad input: definite, so Airflow does not retry it
        raise AirflowFailException(f"epoch must be a positive integer, got {value!r}: {exc}") from None


def barrier_result(event: dict[str, Any]) -> dict[str, Any]:
    """The task result of a barrier decision; a failed barrier or reported stragglers fail the task."""
    where = f"barrier {event['barrier']!r} of {event['pipeline']!r} epoch {event['epoch']}"
    if event["decision"] == "failed":
        raise AirflowFailException(f"{where} failed: {event['late']} did not arrive in time")
    if event["decision"] == "rerun":
        raise AirflowFailException(f"{where}: stragglers {event['late']} must be re-run (rerun policy)")
    return {k: event[k] for k in ("decision", "arrived", "late")}
