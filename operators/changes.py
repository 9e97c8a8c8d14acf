"""Pipeline-level changes as operators: a configuration from a named epoch on, and a rollback.

Neither step is idempotent on its own: each carries one request id for every try of its task, so a
repeat after a lost answer, or a retry after a crash, finds what the first committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, PipelineConfig
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import default_owner, task_request_id
from airflow_epochs.retries import CoordinationRetries, templated_epoch, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context


class ReconfigureOperator(CoordinationRetries, BaseOperator):
    """Schedule a pipeline configuration that takes effect at ``from_epoch`` (templated)."""

    template_fields: Sequence[str] = ("pipeline", "from_epoch")

    def __init__(self, *, pipeline: str, config: Mapping[str, Any], from_epoch: int | str,
                 zookeeper_conn_id: str = ZooKeeperHook.default_conn_name, root: str = DEFAULT_ROOT,
                 **kwargs: Any) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.config = PipelineConfig.from_json(config).to_json()  # validated at parse time
        self.from_epoch = from_epoch
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> int:
        from_epoch = templated_epoch(self.from_epoch)

        # One request id for every try of this task: a repeat after a lost answer, or a retry after a
        # crash, finds the configuration the first committed instead of adding another version.
        request_id = task_request_id(context, per_try=False)

        def reconfigure() -> ConfigVersion:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return hook.ledger(self.pipeline, root=self.root).set_config(
                    PipelineConfig.from_json(self.config), from_epoch=from_epoch, request_id=request_id)

        version = self.coordinated(reconfigure, what=f"pipeline {self.pipeline!r}: config from epoch {from_epoch}")
        self.log.info("Pipeline %s: config version %s from epoch %s", self.pipeline, version.version,
                      version.from_epoch)
        return version.version


class RollbackOperator(CoordinationRetries, BaseOperator):
    """Roll a pipeline back to ``to_epoch`` (recorded with ``reason``), for reprocessing."""

    template_fields: Sequence[str] = ("pipeline", "to_epoch", "reason")

    def __init__(self, *, pipeline: str, to_epoch: int | str, reason: str,
                 zookeeper_conn_id: str = ZooKeeperHook.default_conn_name, root: str = DEFAULT_ROOT,
                 **kwargs: Any) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.to_epoch = to_epoch
        self.reason = reason
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> list[int]:
        try:
            to_epoch = int(str(self.to_epoch).strip())
        except ValueError:
            raise AirflowFailException(f"to_epoch must be an integer, got {self.to_epoch!r}") from None

        # One request id for every try of this task: a rollback is applied once, however often retried.
        request_id = task_request_id(context, per_try=False)

        def rollback() -> list[int]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return hook.ledger(self.pipeline, owner=default_owner(), root=self.root).rollback(
                    to_epoch, reason=self.reason, request_id=request_id)

        undone = self.coordinated(rollback, what=f"pipeline {self.pipeline!r}: roll back to epoch {to_epoch}")
        self.log.info("Pipeline %s rolled back to epoch %s: %s", self.pipeline, to_epoch, undone)
        return undone
