"""Pipeline-level changes as operators: a configuration from a named epoch on, and a rollback.

Neither step is idempotent on its own: each carries one request id for every try of its task, so a
repeat after a lost answer, or a retry after a crash, finds what the first committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger, PipelineConfig
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import default_owner, task_request_id
from airflow_epochs.retries import CoordinationRetries, templated_epoch, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context


class PipelineChangeOperator(CoordinationRetries, BaseOperator):
    """A change of a whole pipeline in one ledger call, with one request id for every try of its task
    (the base of :class:`ReconfigureOperator`, :class:`RollbackOperator` and
    :class:`~airflow_epochs.operators.ResealOperator`).

    :param pipeline: the pipeline.
    :param zookeeper_conn_id: the ZooKeeper connection.
    :param root: the znode under which pipelines live.
    """

    def __init__(self, *, pipeline: str, zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def change(self, context: Context, step: Callable[[EpochLedger, str], Any], *, what: str,
               owner: str | None = None) -> Any:
        """``step(ledger, request_id)`` on a fresh hook's ledger, within the coordination retries.

        One request id for every try of this task: a repeat after a lost answer, or a retry after a
        crash, finds what the first committed instead of applying it again.

        :param owner: the ledger's owner (None: this deployment, ``default_owner()``), recorded with the change.
        """
        request_id = task_request_id(context, per_try=False)

        def attempt() -> Any:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return step(hook.ledger(self.pipeline, owner=owner or default_owner(), root=self.root), request_id)

        return self.coordinated(attempt, what=what)


class ReconfigureOperator(PipelineChangeOperator):
    """Schedule a pipeline configuration that takes effect at ``from_epoch`` (templated)."""

    template_fields: Sequence[str] = ("pipeline", "from_epoch")

    def __init__(self, *, pipeline: str, config: Mapping[str, Any], from_epoch: int | str, **kwargs: Any) -> None:
        super().__init__(pipeline=pipeline, **kwargs)
        self.config = PipelineConfig.from_json(config).to_json()  # validated at parse time
        self.from_epoch = from_epoch

    def execute(self, context: Context) -> int:
        from_epoch = templated_epoch(self.from_epoch)
        version: ConfigVersion = self.change(
            context, lambda ledger, request_id: ledger.set_config(
                PipelineConfig.from_json(self.config), from_epoch=from_epoch, request_id=request_id),
            what=f"pipeline {self.pipeline!r}: config from epoch {from_epoch}")
        self.log.info("Pipeline %s: config version %s from epoch %s", self.pipeline, version.version,
                      version.from_epoch)
        return version.version


class RollbackOperator(PipelineChangeOperator):
    """Roll a pipeline back to ``to_epoch`` (recorded with ``reason``), for reprocessing."""

    template_fields: Sequence[str] = ("pipeline", "to_epoch", "reason")

    def __init__(self, *, pipeline: str, to_epoch: int | str, reason: str, **kwargs: Any) -> None:
        super().__init__(pipeline=pipeline, **kwargs)
        self.to_epoch = to_epoch
        self.reason = reason

    def execute(self, context: Context) -> list[int]:
        try:
            to_epoch = int(str(self.to_epoch).strip())
        except ValueError:
            raise AirflowFailException(f"to_epoch must be an integer, got {self.to_epoch!r}") from None
        undone: list[int] = self.change(
            context, lambda ledger, request_id: ledger.rollback(to_epoch, reason=self.reason, request_id=request_id),
            what=f"pipeline {self.pipeline!r}: roll back to epoch {to_epoch}")
        self.log.info("Pipeline %s rolled back to epoch %s: %s", self.pipeline, to_epoch, undone)
        return undone
