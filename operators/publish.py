"""Publish a sealed partition into an Apache Iceberg table, as a task after the seal.

The seal in ZooKeeper is the commit point; this task follows it and is repeated (Airflow retries)
until the table has exactly one snapshot for the sealed (epoch, partition). See
:mod:`airflow_epochs.tables.publish` for how a repeat finds its snapshot and adds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, InvalidInput
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import attempt_from_xcom
from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["PublishSealedOperator"]


class PublishSealedOperator(CoordinationRetries, BaseOperator):
    """Publish ``partition`` of the epoch (and any sealed epoch before it not yet published) into the
    Iceberg table ``table``, one snapshot per sealed epoch; a ledger rollback is mirrored first.

    :param partition: the sealed partition (templated).
    :param table: the Iceberg table, ``namespace.table`` (templated).
    :param table_conn_id: the Airflow connection of the Iceberg catalog (templated).
    :param output_name: which output of the producers' manifests (default ``data``).
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    :param storage: the pipeline's storage root (templated); when given, every run folder the seal's
        manifests name must be that seal's run folder under it, or nothing is written
        (:class:`~airflow_epochs.tables.RunOutsideStorage`). Without it only the layout is checked.
    """

    template_fields: Sequence[str] = ("partition", "table", "table_conn_id", "storage")
    ui_color = "#b0e0e6"

    def __init__(
        self,
        *,
        partition: str,
        table: str,
        table_conn_id: str = "iceberg_default",
        output_name: str = "data",
        attempt_task_id: str | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        storage: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.partition = partition
        self.table = table
        self.table_conn_id = table_conn_id
        self.output_name = output_name
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.storage = storage
        self.published: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_epochs.tables.tasks import publish_from_task

        attempt = attempt_from_xcom(context, self.attempt_task_id)

        def publish() -> dict[str, Any]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                outcome = publish_from_task(hook, attempt.pipeline, self.partition, attempt.epoch,
                                            table=self.table, conn_id=self.table_conn_id, output=self.output_name,
                                            root=self.root, storage=self.storage)
            return outcome.to_dict()

        try:
            result = self.coordinated(publish, what=f"epoch {attempt.epoch}: publish {self.partition} to {self.table}")
        except InvalidInput as exc:  # a bad table name or connection stays bad
            raise AirflowFailException(str(exc)) from exc
        self.published = {**result, "pipeline": attempt.pipeline, "epoch": attempt.epoch}
        self.log.info("Epoch %s: %s in table %s: %d snapshot(s) made, %d found already", attempt.epoch,
                      self.partition, self.table, len(result["published"]), len(result["already"]))
        return result

    def get_openlineage_facets_on_start(self) -> Any:
        from airflow_epochs.lineage.operators import publish_task_lineage

        return publish_task_lineage(self, complete=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_epochs.lineage.operators import publish_task_lineage

        return publish_task_lineage(self, complete=True)
