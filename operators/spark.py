"""Submit-and-seal: run one producer's Spark job for the open epoch, then vote its manifest.

The job is a Python file with ``main(spark, job)`` (see :mod:`airflow_epochs.spark`). It runs through
the Spark provider's ``SparkSubmitHook`` (``local[*]``, ``spark://``, YARN or Kubernetes masters, from
the Spark connection), or, with ``spark_connect_conn_id``, on a warm Spark Connect session.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_epochs.coordination import DEFAULT_ROOT
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import _attempt_from_xcom
from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.spark import CONTEXT_ARG, EpochContext, submit_and_seal
from airflow_epochs.spark.connect import run_file_on_connect

if TYPE_CHECKING:
    from airflow.sdk import Context

# Settings the operator passes to SparkSubmitHook by name; anything else is refused, so that no
# argument (and no connection extra) can pick the binary or add raw flags.
SUBMIT_OPTIONS = frozenset({
    "conf", "py_files", "files", "archives", "jars", "driver_memory", "executor_memory", "executor_cores",
    "total_executor_cores", "num_executors", "deploy_mode", "yarn_queue", "principal", "keytab",
    "proxy_user", "status_poll_interval", "env_vars",
})


LOCAL_SPARK_CONN = "airflow_epochs_local_spark"


class SparkEpochOperator(BaseOperator):
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
    :param submit_options: further ``SparkSubmitHook`` settings, limited to :data:`SUBMIT_OPTIONS`.
    :param lock_timeout: seconds to wait for the partition's write lock.
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    """

    template_fields: Sequence[str] = ("application", "partition", "producer", "storage", "inputs", "sealed_inputs",
                                      "conn_id", "spark_connect_conn_id")
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        unknown = sorted(set(submit_options or {}) - SUBMIT_OPTIONS)
        if unknown:
            raise ValueError(f"SparkEpochOperator {kwargs.get('task_id')!r}: submit_options {unknown} are not "
                             f"accepted (allowed: {sorted(SUBMIT_OPTIONS)})")
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
        self.submit_options = dict(submit_options or {})
        self.lock_timeout = lock_timeout
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self._submit_hook: Any = None
        self._connect_session: Any = None

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = _attempt_from_xcom(context, self.attempt_task_id)
        if not os.path.isfile(self.application):
            raise AirflowException(f"Spark application {self.application!r} does not exist")
        runner = self._run_on_connect if self.spark_connect_conn_id else self._run_spark_submit
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            outcome = submit_and_seal(hook.get_conn(), attempt, self.partition, self.producer, storage=self.storage,
                                      runner=runner, inputs=self._inputs_for(attempt.epoch),
                                      sealed_inputs=self.sealed_inputs,
                                      lock_timeout=self.lock_timeout,
                                      root=self.root)
        if outcome.action != "ran":
            self.log.info("Epoch %s: partition %s %s; nothing was submitted", attempt.epoch, self.partition,
                          "is already sealed" if outcome.action == "sealed"
                          else f"already has {self.producer}'s vote from this attempt")
        else:
            rows = {name: out.get("rows") for name, out in (outcome.manifest or {}).get("outputs", {}).items()}
            self.log.info("Epoch %s: run %s of %s voted %s with rows %s (partition sealed: %s, removed %d "
                          "superseded runs)", attempt.epoch, outcome.run, self.producer, self.partition, rows,
                          outcome.partition_sealed, len(outcome.removed))
        return outcome.to_dict()

    def _inputs_for(self, epoch: int) -> dict[str, str]:
        return {name: str(location).replace("{epoch}", str(epoch)) for name, location in self.inputs.items()}

    def _run_spark_submit(self, job_context: EpochContext) -> None:
        """Submit through SparkSubmitHook; the driver writes the manifest into its run directory."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        options = dict(self.submit_options)
        env = dict(options.pop("env_vars", None) or {})
        # The driver runs this worker's interpreter (so it has airflow_epochs), unless told otherwise.
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setdefault("SPARK_LOCAL_IP", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
        # Fall back to the wheel's spark-submit when none is on PATH (appended: an installed Spark wins).
        env.setdefault("PATH", os.pathsep.join([os.environ.get("PATH", ""), os.path.dirname(sys.executable)]))
        conn_id = self.conn_id
        if not conn_id:
            # The Spark provider falls back to YARN without a connection; the default here is a local
            # master, given to the hook as a connection of this task process only.
            conn_id = LOCAL_SPARK_CONN
            os.environ[f"AIRFLOW_CONN_{LOCAL_SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark",
                                                                                  "host": "local[*]"})
        self._submit_hook = SparkSubmitHook(
            conn_id=conn_id,
            name=f"epochs-{job_context.pipeline}-{job_context.partition}-{job_context.epoch}",
            application_args=[CONTEXT_ARG, job_context.to_json()],
            env_vars=env,
            **options,
        )
        self._submit_hook.submit(self.application)

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
