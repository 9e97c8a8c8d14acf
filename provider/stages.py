"""Which epoch a stage of a DAG belongs to, below both the operators and the sensors: the task that
opened the epoch of the EpochGroup being defined (at parse time), and templated epoch numbers (at run
time). Operators and sensors import this module; it imports neither."""

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
