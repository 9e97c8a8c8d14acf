"""The consumer's side of declared producers: the gate asset it schedules on, and its first task.

A consumer DAG schedules on :func:`declared_gate_asset` (an asset whose watcher,
:class:`~airflow_epochs.triggers.declared.DeclaredKeyEventTrigger`, turns each complete key's seal
into one asset event) and starts with :class:`ReceiveDeclaredKeyOperator`, which returns the key
(``{{ ti.xcom_pull(task_ids='receive')['partition_key'] }}``) and acknowledges it, releasing the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetWatcher, BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, CorruptPayload, validate_name
from airflow_epochs.coordination.recipes.backpressure.consumers import ConsumerState
from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults
from airflow_epochs.triggers.declared import DeclaredKeyEventTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


def declared_gate_asset(
    pipeline: str,
    partition: str,
    *,
    consumer: str,
    scope: str = "default",
    zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
    root: str = DEFAULT_ROOT,
) -> Asset:
    """The asset a consumer of a declared partition schedules on: one event per complete key.

    :param pipeline: the pipeline that declares the producers.
    :param partition: the declared partition.
    :param consumer: the consumer's name (its DAG id, say); its acknowledgement of a key releases the next.
    :param scope: the delivery scope (one per Airflow deployment); each consumer keeps its own cursor in
        it, so two consumers of one partition each get every key.
    """
    validate_name("pipeline", pipeline)
    validate_name("partition", partition)
    validate_name("consumer", consumer)
    trigger = DeclaredKeyEventTrigger(pipeline=pipeline, partition=partition, consumer=consumer, scope=scope,
                                      zookeeper_conn_id=zookeeper_conn_id, root=root)
    return Asset(name=f"epochs.{pipeline}.{partition}.{consumer}", uri=f"epochs://{pipeline}/{partition}/{consumer}",
                 watchers=[AssetWatcher(name=f"declared_{pipeline}_{partition}_{consumer}", trigger=trigger)])


def received_keys(triggering_asset_events: Any, pipeline: str, partition: str) -> list[dict[str, Any]]:
    """The complete keys in a run's triggering events (``partition_key``, ``epoch``, ``dedupe_key``)."""
    found: dict[str, dict[str, Any]] = {}
    for events in (triggering_asset_events or {}).values():
        for event in events:
            try:
                sealed = SealedPartitionEvent.from_extra(getattr(event, "extra", None) or {},
                                                         partition_key=getattr(event, "partition_key", None))
            except CorruptPayload:
                continue  # an event of another kind on the same asset
            if sealed.pipeline == pipeline and sealed.partition == partition:
                found[sealed.dedupe_key] = {"partition_key": sealed.key, "epoch": sealed.epoch,
                                            "dedupe_key": sealed.dedupe_key}
    return sorted(found.values(), key=lambda item: item["epoch"])


class ReceiveDeclaredKeyOperator(CoordinationRetries, BaseOperator):
    """First task of a consumer of a declared partition: return the key of the run's event and
    acknowledge it, so that the gate releases the next key (one run per key).

    :param pipeline: the pipeline that declares the producers (templated).
    :param partition: the declared partition (templated).
    :param consumer: the consumer's name, as given to :func:`declared_gate_asset` (templated).
    """

    template_fields: Sequence[str] = ("pipeline", "partition", "consumer")

    def __init__(
        self,
        *,
        pipeline: str,
        partition: str,
        consumer: str,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.pipeline = pipeline
        self.partition = partition
        self.consumer = consumer
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        consumer = validate_name("consumer", self.consumer)
        keys = received_keys(context.get("triggering_asset_events"), self.pipeline, self.partition)
        if not keys:
            raise AirflowFailException(f"this run has no asset event of declared partition {self.partition!r} of "
                                       f"pipeline {self.pipeline!r}: schedule the DAG on declared_gate_asset()")
        if len(keys) > 1:
            self.log.warning("This run received %d keys (%s): the gate releases one key at a time per "
                             "acknowledgement; process them all", len(keys), [k["partition_key"] for k in keys])
        newest = keys[-1]["epoch"]

        def ack() -> ConsumerState:  # idempotent: acknowledgements never move back
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                ledger = hook.ledger(self.pipeline, root=self.root)
                reader = ledger.consumer(consumer)
                reader.register(acked=min(newest, ledger.frontier()))
                return reader.acknowledge(newest)

        self.coordinated(ack, what=f"pipeline {self.pipeline!r}: {consumer} acknowledging epoch {newest}")
        self.log.info("Pipeline %s: received key(s) %s", self.pipeline, [k["partition_key"] for k in keys])
        return {"partition_key": keys[-1]["partition_key"], "epoch": newest, "keys": keys}
