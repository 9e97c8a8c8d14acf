"""Corrections as an operator: re-seal a partition of a sealed past epoch as a new version.

A thin class over the hook's ledger (``EpochLedger.reseal``): one request id for every try of the
task, so a retry after a crash or a lost answer finds the version the first try opened instead of
being refused as a second re-seal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_epochs.coordination import DEFAULT_ROOT, Reseal
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import default_owner, task_request_id
from airflow_epochs.retries import CoordinationRetries, templated_epoch, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context


class ResealOperator(CoordinationRetries, BaseOperator):
    """Open the next version of ``partition`` at the sealed past ``epoch`` (templated); its producers then
    re-produce it under that version, and every seal that read the old one is re-produced after it.

    :param pipeline: the pipeline.
    :param epoch: the sealed epoch to correct (templated, e.g. ``"{{ params.day }}"``).
    :param partition: the partition whose input was late or corrected.
    :param reason: why, recorded in the pipeline's history.
    :param zookeeper_conn_id: the ZooKeeper connection.
    :param root: the znode under which pipelines live.
    :return: (to XCom) the version opened: ``epoch``, ``partition``, ``version``, ``state``, ``correction``.
    """

    template_fields: Sequence[str] = ("pipeline", "epoch", "partition", "reason")

    def __init__(self, *, pipeline: str, epoch: int | str, partition: str, reason: str,
                 zookeeper_conn_id: str = ZooKeeperHook.default_conn_name, root: str = DEFAULT_ROOT,
                 **kwargs: Any) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.epoch = epoch
        self.partition = partition
        self.reason = reason
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        epoch = templated_epoch(self.epoch)
        request_id = task_request_id(context, per_try=False)

        def reseal() -> Reseal:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return hook.ledger(self.pipeline, owner=default_owner(), root=self.root).reseal(
                    epoch, self.partition, reason=self.reason, request_id=request_id)

        asked = self.coordinated(reseal, what=f"pipeline {self.pipeline!r}: re-seal {self.partition!r} at {epoch}")
        self.log.info("Pipeline %s: %s at epoch %s re-sealed as version %s (%s, correction %s)", self.pipeline,
                      asked.partition, asked.epoch, asked.version, asked.state, asked.correction)
        return {"epoch": asked.epoch, "partition": asked.partition, "version": asked.version, "state": asked.state,
                "correction": asked.correction}
