"""SealedPartitionSensor: wait until one or several partitions of an epoch are sealed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import EpochLedger, PipelineNotFound, validate_name
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.retries import templated_epoch
from airflow_epochs.sensors.base import ZooKeeperTriggerSensor
from airflow_epochs.triggers.seals import PartitionsSealedTrigger


class SealedPartitionSensor(ZooKeeperTriggerSensor):
    """Succeed once every partition in ``partitions`` is sealed at ``epoch`` (several partitions =
    alignment, as with aligned checkpoint barriers). Returns ``{partition: {attempt, generation, zxid,
    version}}``: ``version`` is the newest sealed version of the partition (1 unless it was re-sealed).

    :param pipeline: pipeline name (templated).
    :param partitions: a partition name or a list of them (templated).
    :param epoch: the epoch (templated).
    """

    template_fields: Sequence[str] = ("pipeline", "partitions", "epoch")

    def __init__(self, *, pipeline: str, partitions: str | Sequence[str], epoch: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.partitions = partitions
        self.epoch = epoch

    def _partition_list(self) -> list[str]:
        names = [self.partitions] if isinstance(self.partitions, str) else list(self.partitions)
        return [validate_name("partition", name) for name in names]

    def waiting_for(self) -> str:
        return (f"partition(s) {', '.join(self._partition_list())} of pipeline {self.pipeline!r} to be sealed "
                f"at epoch {self.epoch}")

    def diagnose(self, ledger: EpochLedger) -> str | None:
        """A missing pipeline (see the base class); a partition the epoch does not have fails at once when the
        epoch is opened (its configuration is fixed), and is said when it is not (a configuration version
        from a later epoch may still add it)."""
        said = super().diagnose(ledger)
        if said:
            return said
        epoch = templated_epoch(self.epoch)
        try:
            info = ledger.epoch_info(epoch)
            opened = info is not None and info.state in ("open", "sealed")
            known = set(info.partitions) if info is not None and opened else \
                set(ledger.config_for(epoch).config.partitions)
        except PipelineNotFound:
            return None
        unknown = [name for name in self._partition_list() if name not in known]
        if not unknown:
            return None
        message = (f"{self.task_id}: pipeline {self.pipeline!r} has no partition {', '.join(map(repr, unknown))} at "
                   f"epoch {epoch}; its partitions there: {', '.join(sorted(known))}")
        if opened:
            raise AirflowFailException(message + " (the epoch is opened: its configuration no longer changes)")
        return message + "; a configuration version from a later epoch may still add it, so the wait goes on"

    def build_trigger(self) -> PartitionsSealedTrigger:
        return PartitionsSealedTrigger(pipeline=self.pipeline, epoch=templated_epoch(self.epoch),
                                       partitions=self._partition_list(), zookeeper_conn_id=self.zookeeper_conn_id,
                                       root=self.root)

    def on_event(self, event: dict[str, Any]) -> dict[str, Any]:
        # The trigger learns of a seal from its watch and reads nothing; the attempt that sealed each
        # partition is read here, once, in the worker.
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            ledger = hook.ledger(self.pipeline, root=self.root)
            seals = {p: ledger.seal_record(int(event["epoch"]), p) for p in sorted(event["seals"])}
            views = {p: ledger.corrections.sealed_version(int(event["epoch"]), p) for p in seals}
        versions = {p: 1 if view is None else view.version for p, view in views.items()}
        self.log.info("Pipeline %s epoch %s: sealed %s", self.pipeline, event["epoch"], sorted(seals))
        return {p: {"attempt": s.attempt if s else None, "generation": s.generation if s else
                    event["seals"][p]["generation"], "zxid": s.zxid if s else event["seals"][p]["zxid"],
                    "version": versions[p]}
                for p, s in seals.items()}
