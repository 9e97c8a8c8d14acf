"""FrontierSensor: wait until a pipeline's frontier reaches an epoch (deferrable, or poking)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_epochs.retries import templated_epoch
from airflow_epochs.sensors.base import ZooKeeperTriggerSensor
from airflow_epochs.triggers.frontier import FrontierReachedTrigger


class FrontierSensor(ZooKeeperTriggerSensor):
    """Succeed once every epoch up to ``epoch`` of ``pipeline`` is sealed; returns the frontier.

    :param pipeline: pipeline name (templated).
    :param epoch: the epoch the frontier must reach (templated).
    """

    template_fields: Sequence[str] = ("pipeline", "epoch")

    def __init__(self, *, pipeline: str, epoch: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.epoch = epoch

    def waiting_for(self) -> str:
        return f"the frontier of pipeline {self.pipeline!r} to reach epoch {self.epoch}"

    def build_trigger(self) -> FrontierReachedTrigger:
        return FrontierReachedTrigger(pipeline=self.pipeline, epoch=templated_epoch(self.epoch),
                                      zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)

    def on_event(self, event: dict[str, Any]) -> int:
        self.log.info("Pipeline %s: frontier %s reached epoch %s", self.pipeline, event["frontier"], event["epoch"])
        return int(event["frontier"])
