"""EpochGroup: a task group that reads like ``open >> [ingest_a, ingest_b] >> barrier >> join >> seal``.

Inside the group, epoch operators find the group's open task by themselves (no XCom wiring by hand)::

    with EpochGroup("epoch", pipeline="flights", config=CONFIG, calendar=DAILY) as epoch:
        ingest = [VotePartitionOperator(task_id=p, partition=p, producer=p) for p in ("a", "b")]
        wait = ArriveAtBarrierOperator(task_id="both_in", barrier="ingested", participant="join")
        epoch.open >> ingest >> wait >> epoch.close
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.sdk import TaskGroup

__all__ = ["EpochGroup", "current_open_task_id"]

# The open task of the EpochGroup being defined (DAG parse time), for the stages inside it.
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


class EpochGroup(TaskGroup):
    """A TaskGroup with an ``open`` (OpenEpochOperator) and a ``close`` (CloseEpochOperator) task.

    :param group_id: the group's id.
    :param pipeline: pipeline name.
    :param config: pipeline configuration (creates the pipeline if missing).
    :param close_partitions: partitions whose asset events ``close`` emits (default: all in ``config``).
    :param open_kwargs: further arguments of the open task (calendar, lease_seconds, ...).
    """

    def __init__(
        self,
        group_id: str,
        *,
        pipeline: str,
        config: Mapping[str, Any] | None = None,
        close_partitions: Sequence[str] | None = None,
        open_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._scope: contextlib.ExitStack | None = None
        super().__init__(group_id, **kwargs)
        from airflow_epochs.operators.epoch import CloseEpochOperator, OpenEpochOperator

        with self:
            self.open = OpenEpochOperator(task_id="open", pipeline=pipeline, config=config, **dict(open_kwargs or {}))
            partitions = list(close_partitions) if close_partitions is not None else \
                list((config or {}).get("partitions", {}))
            self.close = CloseEpochOperator(task_id="close", pipeline=pipeline, partitions=partitions,
                                            attempt_task_id=self.open.task_id)

    def __enter__(self) -> EpochGroup:
        group = super().__enter__()
        opener = getattr(self, "open", None)
        if opener is not None:
            self._scope = contextlib.ExitStack()
            self._scope.enter_context(open_task_scope(opener.task_id))
        return group  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        if self._scope is not None:
            self._scope.close()
            self._scope = None
        super().__exit__(*exc)  # type: ignore[no-untyped-call]  # TaskGroup.__exit__ is unannotated
