"""NewestVersionSensor: wait for the newest version of a sealed partition (after a re-seal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import validate_name
from airflow_epochs.retries import templated_epoch
from airflow_epochs.sensors.base import ZooKeeperTriggerSensor
from airflow_epochs.triggers.versions import NewestVersionTrigger


class NewestVersionSensor(ZooKeeperTriggerSensor):
    """Succeed once ``partition`` is sealed at ``epoch`` and no re-seal of it is open (a correction being
    re-produced is waited for), at ``min_version`` or later. Returns ``{"version": ..., "generation": ...}``.

    :param pipeline: pipeline name (templated).
    :param partition: the partition (templated).
    :param epoch: the epoch (templated).
    :param min_version: the lowest version that counts (templated; 1: the original seal).
    """

    template_fields: Sequence[str] = ("pipeline", "partition", "epoch", "min_version")

    def __init__(self, *, pipeline: str, partition: str, epoch: int | str, min_version: int | str = 1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.partition = partition
        self.epoch = epoch
        self.min_version = min_version

    def _min_version(self) -> int:
        try:
            value = int(str(self.min_version).strip())
        except ValueError:
            value = 0
        if value < 1:
            raise AirflowFailException(f"min_version must be a positive integer, got {self.min_version!r}")
        return value

    def waiting_for(self) -> str:
        return (f"partition {self.partition!r} of pipeline {self.pipeline!r} at epoch {self.epoch} to be sealed "
                f"as version {self.min_version} or later, with no re-seal open")

    def build_trigger(self) -> NewestVersionTrigger:
        return NewestVersionTrigger(pipeline=self.pipeline, epoch=templated_epoch(self.epoch),
                                    partition=validate_name("partition", self.partition),
                                    min_version=self._min_version(), zookeeper_conn_id=self.zookeeper_conn_id,
                                    root=self.root)

    def on_event(self, event: dict[str, Any]) -> dict[str, Any]:
        self.log.info("Pipeline %s epoch %s: %s sealed as version %s", self.pipeline, event["epoch"],
                      event["partition"], event["version"])
        return {"version": event["version"], "generation": event["generation"]}
