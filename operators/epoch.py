"""Open an epoch, vote a partition, close the epoch: thin operators over the coordination core."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_epochs.coordination import Attempt, PipelineConfig, validate_epoch, validate_name
from airflow_epochs.hooks.zookeeper import ZooKeeperHook

if TYPE_CHECKING:
    from airflow.sdk import Context

DEPLOYMENT_ENV = "AIRFLOW_EPOCHS_DEPLOYMENT"


def default_owner() -> str:
    """This deployment's identity: ``$AIRFLOW_EPOCHS_DEPLOYMENT``, else the host name."""
    raw = os.environ.get(DEPLOYMENT_ENV) or socket.gethostname()
    return "".join(ch if ch.isalnum() or ch in "_.-" else "-" for ch in raw)[:128]


def _epoch(value: Any) -> int:
    """Epochs arrive templated (strings); turn them into validated integers."""
    try:
        number = int(str(value).strip())
    except ValueError:
        raise AirflowException(f"epoch must be an integer, got {value!r}") from None
    return validate_epoch(number)


class _EpochOperator(BaseOperator):
    """Arguments shared by the epoch operators."""

    template_fields: Sequence[str] = ("pipeline", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int | str,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        owner_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.epoch = epoch
        self.zookeeper_conn_id = zookeeper_conn_id
        self.owner_id = owner_id

    def _hook(self) -> ZooKeeperHook:
        return ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id)

    def _owner(self) -> str:
        return validate_name("owner", self.owner_id or default_owner())


class OpenEpochOperator(_EpochOperator):
    """Open (or resume) an epoch of a pipeline and push its attempt to XCom.

    Creates the pipeline with ``config`` on first use. The pushed value is the attempt as a dict
    (pipeline, epoch, fencing token, owner, config version), which the vote and close operators read.

    :param pipeline: pipeline name (templated).
    :param epoch: epoch number (templated).
    :param config: ``{"partitions": {name: [producers]}}`` used to create the pipeline if missing.
    :param takeover: supersede another owner's running attempt instead of failing.
    :param zookeeper_conn_id: ZooKeeper connection.
    :param owner_id: identity recorded on the attempt; defaults to this deployment's identity.
    """

    def __init__(self, *, config: Mapping[str, Any] | None = None, takeover: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.takeover = takeover

    def execute(self, context: Context) -> dict[str, Any]:
        epoch = _epoch(self.epoch)
        with self._hook() as hook:
            ledger = hook.ledger(self.pipeline, owner=self._owner())
            if self.config is not None:
                ledger.create_pipeline(PipelineConfig.from_json(self.config))
            attempt = ledger.open_epoch(epoch, takeover=self.takeover)
        self.log.info(
            "Pipeline %s: epoch %s open under attempt %s of %s", self.pipeline, epoch, attempt.token, attempt.owner
        )
        return attempt.to_dict()


class VotePartitionOperator(BaseOperator):
    """Vote that a producer finished its part of a partition (from a non-Spark task).

    :param attempt_task_id: the task that opened the epoch (its XCom holds the attempt).
    :param partition: partition name (templated).
    :param producer: producer name (templated).
    :param manifest: what the producer wrote (templated): paths, counts, checksums.
    """

    template_fields: Sequence[str] = ("partition", "producer", "manifest")

    def __init__(
        self,
        *,
        attempt_task_id: str,
        partition: str,
        producer: str,
        manifest: Mapping[str, Any] | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.attempt_task_id = attempt_task_id
        self.partition = partition
        self.producer = producer
        self.manifest = manifest
        self.zookeeper_conn_id = zookeeper_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = _pulled_attempt(context, self.attempt_task_id)
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            result = hook.ledger(attempt.pipeline, owner=attempt.owner).vote(
                attempt, self.partition, self.producer, dict(self.manifest or {})
            )
        self.log.info(
            "Epoch %s: %s voted %s (partition sealed: %s, epoch sealed: %s)",
            attempt.epoch, self.producer, self.partition, result.partition_sealed, result.epoch_sealed,
        )
        return {"partition_sealed": result.partition_sealed, "epoch_sealed": result.epoch_sealed}


class CloseEpochOperator(BaseOperator):
    """Verify every partition of the epoch is sealed and seal the epoch (advances the frontier).

    :param attempt_task_id: the task that opened the epoch.
    """

    def __init__(
        self,
        *,
        attempt_task_id: str,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.attempt_task_id = attempt_task_id
        self.zookeeper_conn_id = zookeeper_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = _pulled_attempt(context, self.attempt_task_id)
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            ledger = hook.ledger(attempt.pipeline, owner=attempt.owner)
            info = ledger.close_epoch(attempt)
            frontier = ledger.frontier()
        self.log.info("Pipeline %s: epoch %s sealed; frontier %s", attempt.pipeline, attempt.epoch, frontier)
        return {"epoch": info.epoch, "frontier": frontier, "partitions": list(info.sealed_partitions)}


def _pulled_attempt(context: Context, task_id: str) -> Attempt:
    value = context["ti"].xcom_pull(task_ids=task_id)
    if not isinstance(value, Mapping):
        raise AirflowException(f"task {task_id!r} pushed no epoch attempt to XCom (got {value!r})")
    return Attempt.from_dict(value)
