"""Submit-and-seal: run one producer's Spark job for the open epoch, then vote its manifest.

The job is a Python file with ``main(spark, job)`` (see :mod:`airflow_epochs.spark`). It runs through
the Spark provider's ``SparkSubmitHook`` (``local[*]``, ``spark://``, YARN or Kubernetes masters, from
the Spark connection), or, with ``spark_connect_conn_id``, on a warm Spark Connect session; the work
is :class:`~airflow_epochs.hooks.spark_epoch.SparkEpochHook`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, InvalidInput
from airflow_epochs.coordination.wire.manifests import RunManifest
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.lineage.runs import task_lineage_run
from airflow_epochs.operators.epoch import attempt_from_xcom
from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.operators.stages import EpochStage
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults

# Settings passed to SparkSubmitHook by name, each checked by its own rule (see submit_options): no
# argument, connection extra or conf key can pick the binary, the interpreter or a class path.
from airflow_epochs.spark.submit import WRITE_LOCK_TIMEOUT_S
from airflow_epochs.spark.submit_options import SUBMIT_OPTIONS, validate_submit_options

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_epochs.hooks.spark_epoch import SparkEpochHook

__all__ = ["SUBMIT_OPTIONS", "SparkEpochOperator"]


class SparkEpochOperator(EpochStage, CoordinationRetries, BaseOperator):
    """Submit the epoch's Spark job for one partition, wait for it, and vote its manifest.

    Before anything runs it checks (in ZooKeeper) that the previous epoch is sealed and this attempt
    is current; it holds the partition's write lock for the duration of the job; a retry after the
    vote landed does not submit again. After the seal, superseded run directories of the epoch are
    deleted.

    :param application: path of the job file (``main(spark, job)`` plus ``run_job(main)``) (templated).
    :param partition: the partition the job writes (templated).
    :param producer: the producer it votes as (default: the partition's name) (templated).
    :param storage: root location of the pipeline's output (templated).
    :param inputs: named input locations of the epoch (templated); ``{epoch}`` in a location becomes the
        epoch number (``"s3://raw/events/day={epoch}/"``).
    :param sealed_inputs: input name -> partition of the same epoch whose sealed output the job reads
        (templated), e.g. ``{"flights": "flights"}`` for a join after a barrier.
    :param conn_id: (templated) Spark connection for ``spark-submit``; its master may be ``local[*]``,
        ``spark://``, YARN or Kubernetes. None or empty: ``local[*]`` on the worker.
    :param spark_connect_conn_id: (templated) run on this Spark Connect connection instead of ``spark-submit``.
    :param submit_options: further ``SparkSubmitHook`` settings, limited to :data:`SUBMIT_OPTIONS` and
        checked key by key (see :mod:`airflow_epochs.spark.submit_options`: no ``conf`` naming classes, class
        paths, interpreters or JVM options, no ``env_vars`` such as ``PATH``, ``PYTHONPATH`` or ``LD_*``).
    :param lock_timeout: seconds to wait for the partition's write lock.
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    :param table: (templated) publish the sealed partition into this Iceberg table (``namespace.table``)
        right after the seal (see :mod:`airflow_epochs.tables.publish`); a retry repeats the publish.
    :param table_conn_id: (templated) the Airflow connection of the Iceberg catalog.
    """

    template_fields: Sequence[str] = ("application", "partition", "producer", "storage", "inputs", "sealed_inputs",
                                      "conn_id", "spark_connect_conn_id", "table", "table_conn_id")
    ui_color = "#f4a460"

    def __init__(
        self,
        *,
        application: str,
        partition: str,
        storage: str,
        producer: str | None = None,
        inputs: Mapping[str, str] | None = None,
        sealed_inputs: Mapping[str, str] | None = None,
        conn_id: str | None = None,
        spark_connect_conn_id: str | None = None,
        submit_options: Mapping[str, Any] | None = None,
        lock_timeout: float = WRITE_LOCK_TIMEOUT_S,
        attempt_task_id: str | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        table: str | None = None,
        table_conn_id: str = "iceberg_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        try:
            checked = validate_submit_options(submit_options)
        except InvalidInput as exc:
            raise ValueError(f"SparkEpochOperator {kwargs.get('task_id')!r}: {exc}") from None
        if spark_connect_conn_id and submit_options:
            raise ValueError("submit_options apply to spark-submit only, not with spark_connect_conn_id")
        self.application = application
        self.partition = partition
        self.producer = producer or partition
        self.storage = storage
        self.inputs = dict(inputs or {})
        self.sealed_inputs = dict(sealed_inputs or {})
        self.conn_id = conn_id
        self.spark_connect_conn_id = spark_connect_conn_id
        self.submit_options = checked
        self.lock_timeout = lock_timeout
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.table = table
        self.table_conn_id = table_conn_id
        self.epoch_attempt: Any = None  # set by execute (OpenLineage reads it)
        self.published: dict[str, Any] | None = None
        self._hook: SparkEpochHook | None = None

    def _get_hook(self) -> SparkEpochHook:
        """The Spark epoch hook, built on first use (never at DAG parse time)."""
        if self._hook is None:
            from airflow_epochs.hooks.spark_epoch import SparkEpochHook

            self._hook = SparkEpochHook(application=self.application, conn_id=self.conn_id,
                                        spark_connect_conn_id=self.spark_connect_conn_id,
                                        submit_options=self.submit_options,
                                        zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)
        return self._hook

    @property
    def hook(self) -> SparkEpochHook:
        """The operator's Spark epoch hook (built on first use)."""
        return self._get_hook()

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = attempt_from_xcom(context, self.attempt_task_id)
        if (absent := self.not_taking_part(context, attempt)) is not None:
            return absent
        self.epoch_attempt = attempt
        hook = self._get_hook()
        inputs = self._inputs_for(attempt.epoch)
        try:
            # Before anything is locked, written or submitted: the job file, usable locations (their
            # credentials masked) and a master an epoch job can run on.
            hook.check_inputs(self.storage, inputs)
            if not self.spark_connect_conn_id:
                hook.check_master()
            dataset = self._published_dataset()
        except InvalidInput as exc:  # a bad setting stays bad: retrying cannot help
            raise AirflowFailException(str(exc)) from None

        # A retry after a ZooKeeper fault asks the ledger again: it runs nothing if this attempt's vote
        # landed, and otherwise starts a fresh run from the last sealed snapshot.
        lineage_run = task_lineage_run(context["ti"])
        outcome = self.coordinated(
            lambda: hook.submit_and_seal(attempt, self.partition, self.producer, storage=self.storage, inputs=inputs,
                                         sealed_inputs=self.sealed_inputs, lock_timeout=self.lock_timeout,
                                         lineage_run=lineage_run, lineage_dataset=dataset),
            what=f"epoch {attempt.epoch}: {self.producer}'s Spark job for {self.partition}")
        if outcome.action != "ran":
            self.log.info("Epoch %s: partition %s %s; nothing was submitted", attempt.epoch, self.partition,
                          "is already sealed" if outcome.action == "sealed"
                          else f"already has {self.producer}'s vote from this attempt")
        else:
            run = RunManifest.from_vote(outcome.manifest, where=f"the vote of {self.producer!r}")
            rows = {} if run is None else {name: out.rows for name, out in run.outputs.items()}
            self.log.info("Epoch %s: run %s of %s voted %s with rows %s (partition sealed: %s, removed %d "
                          "superseded runs)", attempt.epoch, outcome.run, self.producer, self.partition, rows,
                          outcome.partition_sealed, len(outcome.removed))
        if self.table and outcome.partition_sealed:
            self.published = self._publish(attempt.pipeline, attempt.epoch)
        return outcome.to_dict()

    def _published_dataset(self) -> dict[str, str] | None:
        """The OpenLineage dataset of ``table`` (None without one): voted with the manifest, so every
        task that reads the sealed partition names it as this task names its output."""
        if not self.table:
            return None
        from airflow_epochs.lineage.facets import table_dataset_id
        from airflow_epochs.tables.catalog import settings_from_connection

        namespace, name = table_dataset_id(settings_from_connection(self.table_conn_id).name, str(self.table))
        return {"namespace": namespace, "name": name}

    def _publish(self, pipeline: str, epoch: int) -> dict[str, Any]:
        """Publish the sealed partition into ``table`` (after the seal: its commit point)."""
        from airflow_epochs.tables.tasks import publish_from_task

        def publish() -> dict[str, Any]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return publish_from_task(hook, pipeline, self.partition, epoch, table=str(self.table),
                                         conn_id=self.table_conn_id, root=self.root,
                                         storage=self.storage).to_dict()

        result = self.coordinated(publish, what=f"epoch {epoch}: publish {self.partition} to {self.table}")
        return {**result, "pipeline": pipeline, "epoch": epoch}

    def get_openlineage_facets_on_start(self) -> Any:
        from airflow_epochs.lineage.operators import spark_task_lineage

        return spark_task_lineage(self, complete=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_epochs.lineage.operators import spark_task_lineage

        return spark_task_lineage(self, complete=True)

    def _inputs_for(self, epoch: int) -> dict[str, str]:
        return {name: str(location).replace("{epoch}", str(epoch)) for name, location in self.inputs.items()}

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
