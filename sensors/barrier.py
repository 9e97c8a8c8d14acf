"""BarrierSensor: wait for a barrier's decision without arriving at it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.operators.stages import epoch_xcom
from airflow_epochs.retries import templated_epoch
from airflow_epochs.sensors.base import ZooKeeperTriggerSensor
from airflow_epochs.triggers.barriers import BarrierReleasedTrigger, barrier_result

if TYPE_CHECKING:
    from airflow.sdk import Context


class BarrierSensor(ZooKeeperTriggerSensor):
    """Succeed once the barrier is released (all arrived, or a quorum after the timeout).

    :param pipeline: pipeline name (templated).
    :param epoch: the epoch (templated).
    :param barrier: barrier name (templated).
    :param attempt_task_id: instead of ``pipeline``/``epoch``, the task that opened the epoch
        (defaults to the enclosing EpochGroup's open task).
    """

    template_fields: Sequence[str] = ("pipeline", "epoch", "barrier")

    def __init__(
        self,
        *,
        barrier: str,
        pipeline: str | None = None,
        epoch: int | str | None = None,
        attempt_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.epoch = epoch
        self.barrier = barrier
        self.attempt_task_id = attempt_task_id or (current_open_task_id() if pipeline is None else None)
        if self.pipeline is None and self.attempt_task_id is None:
            raise ValueError("BarrierSensor needs pipeline= and epoch=, or to be inside an EpochGroup")

    def pre_execute(self, context: Context) -> None:
        if self.attempt_task_id:
            attempt = epoch_xcom(context, self.attempt_task_id)
            self.pipeline, self.epoch = attempt["pipeline"], attempt["epoch"]
        super().pre_execute(context)

    def waiting_for(self) -> str:
        return f"barrier {self.barrier!r} of pipeline {self.pipeline!r} at epoch {self.epoch} to be released"

    def build_trigger(self) -> BarrierReleasedTrigger:
        return BarrierReleasedTrigger(pipeline=str(self.pipeline), epoch=templated_epoch(self.epoch),
                                      barrier=self.barrier, zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)

    def on_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return barrier_result(event)
