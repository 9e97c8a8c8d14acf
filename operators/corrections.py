"""Corrections as an operator: re-seal a partition of a sealed past epoch as a new version.

A thin class over the hook's ledger (``EpochLedger.reseal``): one request id for every try of the
task, so a retry after a crash or a lost answer finds the version the first try opened instead of
being refused as a second re-seal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination import Reseal
from airflow_epochs.operators.changes import PipelineChangeOperator
from airflow_epochs.operators.epoch import default_owner
from airflow_epochs.retries import templated_epoch

if TYPE_CHECKING:
    from airflow.sdk import Context


class ResealOperator(PipelineChangeOperator):
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

    def __init__(self, *, pipeline: str, epoch: int | str, partition: str, reason: str, **kwargs: Any) -> None:
        super().__init__(pipeline=pipeline, **kwargs)
        self.epoch = epoch
        self.partition = partition
        self.reason = reason

    def execute(self, context: Context) -> dict[str, Any]:
        epoch = templated_epoch(self.epoch)
        asked: Reseal = self.change(
            context, lambda ledger, request_id: ledger.corrections.reseal(epoch, self.partition, reason=self.reason,
                                                              request_id=request_id),
            what=f"pipeline {self.pipeline!r}: re-seal {self.partition!r} at {epoch}", owner=default_owner())
        self.log.info("Pipeline %s: %s at epoch %s re-sealed as version %s (%s, correction %s)", self.pipeline,
                      asked.partition, asked.epoch, asked.version, asked.state, asked.correction)
        return {"epoch": asked.epoch, "partition": asked.partition, "version": asked.version, "state": asked.state,
                "correction": asked.correction}
