"""Publishing from an Airflow task: the catalog from a connection, the ledger from ZooKeeper.

Used by :class:`airflow_epochs.operators.publish.PublishSealedOperator` and by
``SparkEpochOperator(table=...)`` right after its vote sealed the partition. Either way a retry of the
task repeats the publish, which finds what is already committed and adds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.tables.catalog import load_catalog, settings_from_connection
from airflow_epochs.tables.publish import PublishOutcome, StepHook, publish_sealed

if TYPE_CHECKING:
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

DEFAULT_CONN_ID = "iceberg_default"


def publish_from_task(hook: ZooKeeperHook, pipeline: str, partition: str, epoch: int, *, table: str,
                      conn_id: str = DEFAULT_CONN_ID, output: str = "data", root: str = DEFAULT_ROOT,
                      on_step: StepHook | None = None, storage: str | None = None) -> PublishOutcome:
    """Publish ``partition`` of ``pipeline`` through ``epoch`` into ``table`` (catalog of ``conn_id``),
    reading the seals through ``hook``'s ledger.

    :param storage: the pipeline's storage root, when the task knows it: the run folders the seal's
        manifests name must lie inside it.
    """
    catalog = load_catalog(settings_from_connection(conn_id))
    ledger = hook.ledger(pipeline, root=root)
    return publish_sealed(ledger, catalog, table, partition, epoch, output=output, on_step=on_step,
                          storage=storage)
