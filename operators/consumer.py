"""A downstream consumer's side of backpressure: acknowledge the epochs it has processed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_epochs.coordination import DEFAULT_ROOT, validate_name
from airflow_epochs.coordination.recipes.backpressure.consumers import ConsumerState
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.retries import CoordinationRetries, templated_epoch, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context


class AcknowledgeEpochOperator(CoordinationRetries, BaseOperator):
    """Record that ``consumer`` has processed ``pipeline`` up to ``epoch``.

    With a backpressure window in the pipeline's configuration, the producer does not open an epoch
    more than ``window`` epochs ahead of its slowest registered consumer; this task is how a downstream
    DAG says it kept up. The consumer is registered on first use (starting at the epoch it
    acknowledges, so registering never holds back epochs already allowed). Acknowledgements never move
    back, so a rerun or a late run of an older epoch is harmless.

    :param pipeline: pipeline name (templated).
    :param consumer: the consumer's name (templated), e.g. the downstream DAG's id.
    :param epoch: the epoch processed (templated), e.g. ``"{{ dag_run.partition_key }}"``.
    """

    template_fields: Sequence[str] = ("pipeline", "consumer", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        consumer: str,
        epoch: int | str,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.consumer = consumer
        self.epoch = epoch
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        epoch = templated_epoch(self.epoch)
        consumer = validate_name("consumer", self.consumer)

        def ack() -> ConsumerState:  # idempotent: acknowledgements never move back
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                ledger = hook.ledger(self.pipeline, root=self.root)
                reader = ledger.consumer(consumer)
                reader.register(acked=min(epoch, ledger.frontier()))
                return reader.acknowledge(epoch)

        state = self.coordinated(ack, what=f"pipeline {self.pipeline!r}: {consumer} acknowledging epoch {epoch}")
        self.log.info("Pipeline %s: consumer %s has acknowledged epoch %s", self.pipeline, consumer, state.acked)
        return {"consumer": state.consumer, "acked": state.acked}
