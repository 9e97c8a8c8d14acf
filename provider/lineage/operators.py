"""``get_openlineage_facets_on_start`` / ``_on_complete`` of the provider's operators, delegated here.

Each reads only the operator's public arguments and what its ``execute`` left (``epoch_attempt``,
``published``), plus the seal from ZooKeeper; the Airflow OpenLineage provider calls them.
"""

from __future__ import annotations

from typing import Any

from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.lineage.facets import (
    FACET_NAME,
    input_datasets,
    output_dataset,
    partition_dataset_id,
    run_facet,
    storage_dataset_id,
    table_dataset_id,
)


def _output_id(operator: Any, pipeline: str, partition: str) -> tuple[str, str]:
    table = getattr(operator, "table", None)
    if table:
        from airflow_epochs.tables.catalog import settings_from_connection

        return table_dataset_id(settings_from_connection(operator.table_conn_id).name, table)
    return storage_dataset_id(operator.storage, pipeline, partition)


def spark_task_lineage(operator: Any, *, complete: bool) -> Any:
    """Lineage of a ``SparkEpochOperator``: the partition it seals (with the epoch), the sealed
    partitions it read (named as their producers name them), and (once complete) the ``airflowEpochs``
    run facet."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    attempt = getattr(operator, "epoch_attempt", None) if complete else None
    if attempt is None:  # before execute the pipeline and epoch are in the open task's XCom, not here
        return OperatorLineage()
    pipeline, epoch = attempt.pipeline, attempt.epoch
    published = getattr(operator, "published", None) or {}
    with ZooKeeperHook(zookeeper_conn_id=operator.zookeeper_conn_id) as hook:
        ledger = hook.ledger(pipeline, root=operator.root)
        inputs = {}
        for name, part in (operator.sealed_inputs or {}).items():
            found = partition_dataset_id(ledger, part, epoch, storage=operator.storage)
            if found is not None:
                inputs[name] = found
        lineage: Any = OperatorLineage(
            inputs=input_datasets(inputs, epoch),
            outputs=[output_dataset(*_output_id(operator, pipeline, operator.partition), epoch)])
        lineage.run_facets[FACET_NAME] = run_facet(
            ledger, operator.partition, epoch, producer=operator.producer, attempt=attempt.token,
            table=getattr(operator, "table", None), snapshot_id=_snapshot(published, epoch))
    return lineage


def publish_task_lineage(operator: Any, *, complete: bool) -> Any:
    """Lineage of a ``PublishSealedOperator``: the sealed partition in (named as its producers name
    it), the Iceberg table out."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    published = getattr(operator, "published", None) if complete else None
    if not published:
        return OperatorLineage()
    epoch, pipeline = published["epoch"], published["pipeline"]
    with ZooKeeperHook(zookeeper_conn_id=operator.zookeeper_conn_id) as hook:
        ledger = hook.ledger(pipeline, root=operator.root)
        read = partition_dataset_id(ledger, operator.partition, epoch, storage=operator.storage)
        lineage: Any = OperatorLineage(
            inputs=input_datasets({} if read is None else {operator.partition: read}, epoch),
            outputs=[output_dataset(*_output_id(operator, pipeline, operator.partition), epoch)])
        seal = ledger.seal(epoch, operator.partition)
        lineage.run_facets[FACET_NAME] = run_facet(
            ledger, operator.partition, epoch, producer="publish", attempt=seal.attempt if seal else 0,
            table=operator.table, snapshot_id=_snapshot(published, epoch))
    return lineage


def _snapshot(published: Any, epoch: int) -> int | None:
    for record in [*(published.get("published") or []), *(published.get("already") or [])]:
        if record.get("epoch") == epoch:
            return int(record["snapshot_id"])
    return None


def correction_task_lineage(operator: Any, *, complete: bool) -> Any:
    """Lineage of a ``SparkCorrectionOperator``: each re-produced partition out (named as its producers
    name it, with the epochs re-sealed), and the ``airflowEpochsCorrection`` run facet naming every
    version it sealed and the correction."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_epochs.lineage.corrections import CORRECTION_FACET_NAME, correction_facet, resealed_outputs

    result = getattr(operator, "correction_result", None) if complete else None
    origin = getattr(operator, "correction_origin", None)
    if not result or not origin:
        return OperatorLineage()
    resealed = result.get("resealed") or []
    with ZooKeeperHook(zookeeper_conn_id=operator.zookeeper_conn_id) as hook:
        ledger = hook.ledger(operator.pipeline, root=operator.root)
        ids = {}
        for partition in sorted({str(v["partition"]) for v in resealed}):
            epoch = min(int(v["epoch"]) for v in resealed if v["partition"] == partition)
            found = partition_dataset_id(ledger, partition, epoch, storage=operator.storage)
            if found is not None:
                ids[partition] = found
    lineage: Any = OperatorLineage(outputs=resealed_outputs(ids, resealed))
    lineage.run_facets[CORRECTION_FACET_NAME] = correction_facet(operator.pipeline, result, origin,
                                                                 reason=str(origin.get("reason", "")))
    return lineage
