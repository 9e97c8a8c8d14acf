"""FrontierSensor: wait until a pipeline's frontier reaches an epoch (deferrable by default)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger, validate_epoch
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.triggers.frontier import FrontierReachedTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


class FrontierSensor(BaseSensorOperator):
    """Succeed once every epoch up to ``epoch`` of ``pipeline`` is sealed.

    :param pipeline: pipeline name (templated).
    :param epoch: the epoch the frontier must reach (templated).
    :param zookeeper_conn_id: ZooKeeper connection.
    :param deferrable: wait in the triggerer on a ZooKeeper watch (default) instead of poking.
    """

    template_fields: Sequence[str] = ("pipeline", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int | str,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.epoch = epoch
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.deferrable = deferrable

    def _target(self) -> int:
        try:
            return validate_epoch(int(str(self.epoch).strip()))
        except ValueError as exc:
            raise AirflowException(f"epoch must be a positive integer, got {self.epoch!r}: {exc}") from None

    def poke(self, context: Context) -> bool:
        target = self._target()
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            frontier = EpochLedger(hook.get_conn(), self.pipeline, root=self.root).frontier()
        self.log.info("Pipeline %s: frontier %s, waiting for %s", self.pipeline, frontier, target)
        return frontier >= target

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        target = self._target()
        self.defer(
            trigger=FrontierReachedTrigger(
                pipeline=self.pipeline, epoch=target, zookeeper_conn_id=self.zookeeper_conn_id, root=self.root
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> int:
        if event.get("status") != "success":
            raise AirflowException(
                f"pipeline {self.pipeline!r}: waiting for epoch {self.epoch} to be sealed failed: {event}"
            )
        self.log.info("Pipeline %s: frontier %s reached epoch %s", self.pipeline, event["frontier"], event["epoch"])
        return int(event["frontier"])
