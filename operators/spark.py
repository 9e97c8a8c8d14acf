"""Submit-and-seal: run one producer's Spark job for the open epoch, then vote its manifest.

The job is a Python file with ``main(spark, job)`` (see :mod:`airflow_epochs.spark`). It runs through
the Spark provider's ``SparkSubmitHook`` (``local[*]``, ``spark://``, YARN or Kubernetes masters, from
the Spark connection), or, with ``spark_connect_conn_id``, on a warm Spark Connect session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import DEFAULT_ROOT, InvalidInput
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import attempt_from_xcom
from airflow_epochs.private_files import write_private
from airflow_epochs.redaction import register_uri_secrets
from airflow_epochs.spark import CONTEXT_ARG, EpochContext, submit_and_seal
from airflow_epochs.spark.connect import run_file_on_connect
from airflow_epochs.spark.context import CONTEXT_FILE_ARG
from airflow_epochs.spark.locations import validate_location
from airflow_epochs.spark.submit import SubmitOutcome

# Settings passed to SparkSubmitHook by name, each checked by its own rule (see submit_options): no
# argument, connection extra or conf key can pick the binary, the interpreter or a class path.
from airflow_epochs.spark.submit_options import (
    SUBMIT_OPTIONS,
    check_master,
    spark_master,
    validate_submit_options,
)
from airflow_epochs.stages import current_open_task_id
from airflow_epochs.task_retries import CoordinationRetries, with_retry_defaults

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["LOCAL_SPARK_CONN", "SUBMIT_OPTIONS", "SparkEpochOperator"]


LOCAL_SPARK_CONN = "airflow_epochs_local_spark"


def kubernetes_provider_installed() -> bool:
    """Whether the cncf.kubernetes provider is there: the Spark provider needs it for k8s:// masters."""
    try:
        return importlib.util.find_spec("airflow.providers.cncf.kubernetes") is not None
    except ModuleNotFoundError:  # not even airflow.providers.cncf
        return False


class SparkEpochOperator(CoordinationRetries, BaseOperator):
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
        lock_timeout: float = 300.0,
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
        self._submit_hook: Any = None
        self._connect_session: Any = None
        self._spark_mode: str | None = None
        self._context_file: str | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = attempt_from_xcom(context, self.attempt_task_id)
        self.epoch_attempt = attempt
        if not os.path.isfile(self.application):
            raise AirflowFailException(f"Spark application {self.application!r} does not exist")
        # Before anything is locked, written or submitted: usable locations, and their credentials masked.
        locations = [self.storage, *self._inputs_for(attempt.epoch).values()]
        register_uri_secrets(locations)
        try:
            for what, location in zip(["storage", *self.inputs], locations, strict=True):
                validate_location(what, location)
        except InvalidInput as exc:  # a bad setting stays bad: retrying cannot help
            raise AirflowFailException(str(exc)) from exc
        if not self.spark_connect_conn_id:
            self._check_spark_master()
        runner = self._run_on_connect if self.spark_connect_conn_id else self._run_spark_submit

        def submit() -> SubmitOutcome:
            # A retry after a ZooKeeper fault asks the ledger again: it runs nothing if this attempt's
            # vote landed, and otherwise starts a fresh run from the last sealed snapshot.
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return submit_and_seal(hook.get_conn(), attempt, self.partition, self.producer,
                                       storage=self.storage, runner=runner, inputs=self._inputs_for(attempt.epoch),
                                       sealed_inputs=self.sealed_inputs, lock_timeout=self.lock_timeout,
                                       root=self.root)

        outcome = self.coordinated(submit, what=f"epoch {attempt.epoch}: {self.producer}'s Spark job for "
                                                f"{self.partition}")
        if outcome.action != "ran":
            self.log.info("Epoch %s: partition %s %s; nothing was submitted", attempt.epoch, self.partition,
                          "is already sealed" if outcome.action == "sealed"
                          else f"already has {self.producer}'s vote from this attempt")
        else:
            rows = {name: out.get("rows") for name, out in (outcome.manifest or {}).get("outputs", {}).items()}
            self.log.info("Epoch %s: run %s of %s voted %s with rows %s (partition sealed: %s, removed %d "
                          "superseded runs)", attempt.epoch, outcome.run, self.producer, self.partition, rows,
                          outcome.partition_sealed, len(outcome.removed))
        if self.table and outcome.partition_sealed:
            self.published = self._publish(attempt.pipeline, attempt.epoch)
        return outcome.to_dict()

    def _publish(self, pipeline: str, epoch: int) -> dict[str, Any]:
        """Publish the sealed partition into ``table`` (after the seal: its commit point)."""
        from airflow_epochs.tables.tasks import publish_from_task

        def publish() -> dict[str, Any]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                return publish_from_task(hook.get_conn(), pipeline, self.partition, epoch, table=str(self.table),
                                         conn_id=self.table_conn_id, root=self.root).to_dict()

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

    def _spark_conn_id(self) -> str:
        if self.conn_id:
            return self.conn_id
        # The Spark provider falls back to YARN without a connection; the default here is a local
        # master, given to the hook as a connection of this task process only.
        os.environ[f"AIRFLOW_CONN_{LOCAL_SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark",
                                                                              "host": "local[*]"})
        return LOCAL_SPARK_CONN

    def _check_spark_master(self) -> str:
        """The master's mode; refuses, before anything runs, a mode an epoch job cannot run in."""
        conn = BaseHook.get_connection(self._spark_conn_id())
        deploy_mode = self.submit_options.get("deploy_mode") or conn.extra_dejson.get("deploy-mode")
        master = spark_master(conn.conn_type, conn.host, conn.port)
        try:
            self._spark_mode = check_master(master, deploy_mode,
                                            kubernetes_available=kubernetes_provider_installed())
        except InvalidInput as exc:
            # A bad connection stays bad: fail now instead of retrying.
            raise AirflowFailException(f"Spark connection {self._spark_conn_id()!r}: {exc}") from None
        return self._spark_mode

    def submit_hook(self, job_context: EpochContext) -> Any:
        """The ``SparkSubmitHook`` that submits ``job_context``'s job (not started)."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        mode = self._check_spark_master()
        options = dict(self.submit_options)
        env = dict(options.pop("env_vars", None) or {})
        if mode in ("local", "standalone"):
            # The driver runs here, on this worker's interpreter (so it has airflow_epochs). On YARN or
            # Kubernetes the driver runs elsewhere: nothing of this machine's environment goes there.
            env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                       SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
        if shutil.which("spark-submit") is None:
            # The wheel's spark-submit beside this interpreter, for this task process only (appended: an
            # installed Spark wins); never through env_vars, which YARN would ship to the cluster.
            os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), os.path.dirname(sys.executable)])
        if mode in ("local", "standalone"):
            # The driver runs here: it reads its context from a 0600 file, so that locations (and any
            # credentials in them) are neither in the process list nor in spark-submit's logged command.
            folder = tempfile.mkdtemp(prefix="airflow-epochs-context-")
            self._context_file = str(write_private(os.path.join(folder, "context.json"), job_context.to_json()))
            arguments = [CONTEXT_FILE_ARG, self._context_file]
        else:  # the driver runs on the cluster, where no file of this host is
            arguments = [CONTEXT_ARG, job_context.to_json()]
        return SparkSubmitHook(
            conn_id=self._spark_conn_id(),
            name=f"epochs-{job_context.pipeline}-{job_context.partition}-{job_context.epoch}",
            application_args=arguments,
            env_vars=env or None,
            **options,
        )

    def _run_spark_submit(self, job_context: EpochContext) -> None:
        """Submit through SparkSubmitHook; the driver writes the manifest into its run directory."""
        self._submit_hook = self.submit_hook(job_context)
        try:
            self._submit_hook.submit(self.application)
        finally:
            if self._context_file:
                shutil.rmtree(os.path.dirname(self._context_file), ignore_errors=True)
                self._context_file = None

    def _run_on_connect(self, job_context: EpochContext) -> dict[str, Any]:
        """Run ``main(spark, job)`` in this process against the Spark Connect server."""
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        url = SparkConnectHook(conn_id=self.spark_connect_conn_id or "").get_connection_url()
        return run_file_on_connect(url, self.application, job_context,
                                   on_session=lambda session: setattr(self, "_connect_session", session))

    def on_kill(self) -> None:
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
        session = self._connect_session
        if session is not None:
            session.interruptAll()
