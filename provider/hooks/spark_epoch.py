"""SparkEpochHook: one producer's epoch job on Spark, from the master check to the vote.

It holds what running an epoch job on a worker takes, so that :class:`SparkEpochOperator` only holds
arguments: the check of the Spark master (refused before anything runs when an epoch job cannot run
there), the job's environment and interpreter, the private context file a local driver reads, and the
choice between ``spark-submit`` (through the Spark provider's ``SparkSubmitHook``) and a warm Spark
Connect session. It never changes this process's environment: the default local master is a
connection of this hook alone, and the ``spark-submit`` it runs is named by its path.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, Connection

from airflow_epochs.coordination import DEFAULT_ROOT, Attempt, InvalidInput, Reseal
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.private_files import UnsafeState, private_dir, write_private
from airflow_epochs.redaction import register_uri_secrets
from airflow_epochs.spark.connect import run_file_on_connect
from airflow_epochs.spark.context import CONTEXT_ARG, CONTEXT_FILE_ARG, EpochContext
from airflow_epochs.spark.locations import parse_location, validate_location
from airflow_epochs.spark.reseal import ResubmitOutcome, resubmit_version
from airflow_epochs.spark.submit import WRITE_LOCK_TIMEOUT_S, SubmitOutcome, submit_and_seal
from airflow_epochs.spark.submit_options import (
    check_master,
    deployment_setting,
    spark_master,
    validate_submit_options,
)

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

# EpochSparkSubmitHook lives in hooks/epoch_spark_submit.py (still importable from here, on first use).
__all__ = ["LOCAL_SPARK_CONN", "SparkEpochHook", "kubernetes_provider_installed"]

#: The connection id standing for ``local[*]`` on the worker when no Spark connection is given (the
#: Spark provider itself would fall back to YARN). Known to this hook only, never to the environment.
LOCAL_SPARK_CONN = "airflow_epochs_local_spark"
# A standalone cluster's secret as a properties file may hold it: one token, no line break or backslash.
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")


def kubernetes_provider_installed() -> bool:
    """Whether the cncf.kubernetes provider is there: the Spark provider needs it for k8s:// masters."""
    try:
        return importlib.util.find_spec("airflow.providers.cncf.kubernetes") is not None
    except ModuleNotFoundError:  # not even airflow.providers.cncf
        return False


def local_spark_connection() -> Connection:
    """The connection :data:`LOCAL_SPARK_CONN` names: a ``local[*]`` master."""
    return Connection(conn_id=LOCAL_SPARK_CONN, conn_type="spark", host="local[*]")


def spark_submit_path() -> str | None:
    """The ``spark-submit`` to run by path, or None to let the Spark provider find it on ``PATH``.

    An installed Spark (on ``PATH``) wins; otherwise the pyspark wheel's script beside this interpreter
    (the virtualenv's ``bin``). Chosen here, never by a connection extra or a task argument.
    """
    if shutil.which("spark-submit") is not None:
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    return beside if os.access(beside, os.X_OK) else None


class SparkEpochHook(BaseHook):
    """Run one producer's epoch job on Spark and vote its manifest through the epoch ledger.

    :param application: the job file (``main(spark, job)`` plus ``run_job(main)``).
    :param conn_id: Spark connection for ``spark-submit``; None or empty: ``local[*]`` on the worker.
    :param spark_connect_conn_id: run on this Spark Connect connection instead of ``spark-submit``.
    :param submit_options: further ``SparkSubmitHook`` settings, checked key by key by
        :func:`~airflow_epochs.spark.submit_options.validate_submit_options`.
    :param zookeeper_conn_id: the ZooKeeper connection of the epoch ledger.
    :param root: the znode under which pipelines live.
    """

    hook_name = "Spark epoch job"

    def __init__(
        self,
        *,
        application: str,
        conn_id: str | None = None,
        spark_connect_conn_id: str | None = None,
        submit_options: Mapping[str, Any] | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if spark_connect_conn_id and submit_options:
            raise InvalidInput("submit_options apply to spark-submit only, not with spark_connect_conn_id")
        self.application = application
        self.conn_id = conn_id or LOCAL_SPARK_CONN
        self.spark_connect_conn_id = spark_connect_conn_id or None
        self.submit_options = validate_submit_options(submit_options)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self._submit_hook: SparkSubmitHook | None = None
        self._connect_session: Any = None

    def get_conn(self) -> Connection:
        """The Spark connection ``spark-submit`` runs on (the local master's when none was given)."""
        return self.spark_connection(self.conn_id)

    @classmethod
    def spark_connection(cls, conn_id: str) -> Connection:
        """``conn_id``'s connection; :data:`LOCAL_SPARK_CONN` is answered here, without a lookup."""
        return local_spark_connection() if conn_id == LOCAL_SPARK_CONN else cls.get_connection(conn_id)

    # -- checks, before anything is locked, written or submitted ------------------------------------

    def check_inputs(self, storage: str, inputs: Mapping[str, str]) -> None:
        """The job file exists and every location is usable; their credentials are masked in logs.

        :raises InvalidInput: naming the bad setting (retrying cannot help).
        """
        if not os.path.isfile(self.application):
            raise InvalidInput(f"Spark application {self.application!r} does not exist")
        register_uri_secrets([storage, *inputs.values()])
        parse_location("storage", storage)
        for name, location in inputs.items():
            validate_location(name, location)

    def check_master(self) -> str:
        """The mode of the Spark master (``local``, ``standalone``, ``yarn``, ``kubernetes``).

        :raises InvalidInput: the master or deploy mode cannot run an epoch job (naming the connection).
        """
        conn = self.get_conn()
        master = spark_master(conn.conn_type, conn.host, conn.port)
        try:
            return check_master(master, self.deploy_mode(), kubernetes_available=kubernetes_provider_installed())
        except InvalidInput as exc:
            raise InvalidInput(f"Spark connection {self.conn_id!r}: {exc}") from None

    def deploy_mode(self) -> str | None:
        """The job's deploy mode (the operator's ``deploy_mode`` first, then the connection's), None for Spark's
        default (client: the driver runs on this worker)."""
        mode = self.submit_options.get("deploy_mode") or self.get_conn().extra_dejson.get("deploy-mode")
        return None if mode is None else str(mode)

    # -- running the job -----------------------------------------------------------------------------

    def submit_and_seal(
        self,
        attempt: Attempt,
        partition: str,
        producer: str,
        *,
        storage: str,
        inputs: Mapping[str, str] | None = None,
        sealed_inputs: Mapping[str, str] | None = None,
        lock_timeout: float = WRITE_LOCK_TIMEOUT_S,
        lineage_run: Mapping[str, str] | None = None,
        lineage_dataset: Mapping[str, str] | None = None,
    ) -> SubmitOutcome:
        """Run the job for ``attempt``'s epoch and vote its manifest (see :mod:`airflow_epochs.spark.submit`).

        Safe to repeat: it runs nothing when this attempt's vote landed, and otherwise starts a fresh
        run from the last sealed snapshot.
        """
        if not self.spark_connect_conn_id:
            self.check_master()
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as zookeeper:
            ledger = zookeeper.ledger(attempt.pipeline, owner=attempt.owner, root=self.root)
            return submit_and_seal(ledger, attempt, partition, producer, storage=storage, runner=self.run,
                                   inputs=inputs, sealed_inputs=sealed_inputs, lock_timeout=lock_timeout,
                                   lineage_run=lineage_run, lineage_dataset=lineage_dataset)

    def resubmit_version(
        self,
        reseal: Reseal,
        producer: str,
        *,
        storage: str,
        inputs: Mapping[str, str] | None = None,
        sealed_inputs: Mapping[str, str] | None = None,
    ) -> ResubmitOutcome:
        """Re-produce ``producer``'s part of the open version ``reseal`` with this job and vote it under
        that version (see :func:`~airflow_epochs.spark.reseal.resubmit_version`): the job's inputs of the
        same epoch and its snapshot are the newest sealed versions."""
        if not self.spark_connect_conn_id:
            self.check_master()
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as zookeeper:
            ledger = zookeeper.ledger(reseal.pipeline, root=self.root)
            return resubmit_version(ledger, reseal, producer, storage=storage, runner=self.run, inputs=inputs,
                                    sealed_inputs=sealed_inputs)

    def run(self, job_context: EpochContext) -> dict[str, Any] | None:
        """Run the job for ``job_context``: its manifest, or None when the driver wrote it to storage."""
        if self.spark_connect_conn_id:
            return self.run_on_connect(job_context)
        self.run_spark_submit(job_context)
        return None

    def submit_hook(self, job_context: EpochContext) -> tuple[SparkSubmitHook, str | None]:
        """The ``SparkSubmitHook`` for ``job_context``'s job (not started), and the folder of the private
        context file it reads (None when the context travels as an argument); the caller removes it."""
        mode = self.check_master()
        options = dict(self.submit_options)
        env = dict(options.pop("env_vars", None) or {})
        folder: str | None = None
        yarn_client = mode == "yarn" and self.deploy_mode() != "cluster"
        if mode in ("local", "standalone") or yarn_client:
            # The driver runs here, on this worker's interpreter (so it has airflow_epochs). It reads its
            # context from a 0600 file, so that locations (and any credentials in them) are neither in
            # the process list nor in spark-submit's logged command. In YARN's or Kubernetes' cluster mode
            # the driver runs elsewhere: nothing of this machine's environment or files goes there.
            # PYTHONSAFEPATH: neither the driver nor its Python workers (``-m pyspark.daemon``) put their
            # working folder or the job's folder first on sys.path, so nothing planted there is imported.
            env.update(PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONSAFEPATH="1")
            if not yarn_client:  # YARN's executors run on its hosts' Python and must reach the driver
                env.update(PYSPARK_PYTHON=sys.executable,
                           SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
            secret = self.cluster_secret() if mode == "standalone" else None
            options["conf"] = self.local_driver_conf(mode, options.get("conf"), cluster_secret=secret is not None)
            folder = tempfile.mkdtemp(prefix="airflow-epochs-context-")
            context_file = write_private(os.path.join(folder, "context.json"), job_context.to_json())
            arguments = [CONTEXT_FILE_ARG, str(context_file)]
            if secret is not None:  # read by spark-submit from a 0600 file: on no command line, in no log
                options["properties_file"] = str(write_private(os.path.join(folder, "spark-auth.properties"),
                                                               f"spark.authenticate.secret={secret}\n"))
        else:
            arguments = [CONTEXT_ARG, job_context.to_json()]
        # Imported here: a task on Spark Connect never loads the Spark provider's submit hook.
        from airflow_epochs.hooks.epoch_spark_submit import EpochSparkSubmitHook

        hook = EpochSparkSubmitHook(
            conn_id=self.conn_id,
            name=f"epochs-{job_context.pipeline}-{job_context.partition}-{job_context.epoch}",
            application_args=arguments,
            env_vars=env or None,
            spark_binary=spark_submit_path(),
            **options,
        )
        return hook, folder

    def cluster_secret(self) -> str | None:
        """The standalone cluster's RPC secret (``spark.authenticate.secret``): the Spark connection's
        password, None when it has none (the cluster then authenticates nothing, or its admin configured
        the secret in Spark's own ``spark-defaults.conf`` on this worker).

        :raises InvalidInput: the password is not a plain secret (it goes into a properties file, where a
            line break or a backslash would add settings of its own); the value is never named.
        """
        secret = self.get_conn().password
        if not secret:
            return None
        if not _SECRET_SHAPE.fullmatch(secret):
            raise InvalidInput(f"Spark connection {self.conn_id!r}: the password (the standalone cluster's "
                               "spark.authenticate.secret) must be 16 to 512 letters, digits or '._~+/=-'")
        return secret

    @staticmethod
    def local_driver_conf(mode: str, conf: Mapping[str, Any] | None, *,
                          cluster_secret: bool = False) -> dict[str, Any]:
        """``conf`` for a driver that runs on this machine: no Spark UI (it would answer any local user
        on 127.0.0.1), and on the local master Spark's RPC authentication (the driver's RPC and block
        ports then refuse whoever does not know the secret, which Spark generates in the driver's
        memory: it is on no command line, in no file and no log). A standalone master needs the
        cluster's own secret, the Spark connection's password (:meth:`cluster_secret`); with one,
        authentication is on too. In YARN's client mode, ``spark.authenticate`` stays the YARN cluster's
        setting (YARN then makes each application's secret; its shuffle service must agree).

        With ``spark.eventLog.enabled`` the driver writes its event log into ``event_log_folder()``.

        :param cluster_secret: a standalone cluster's secret goes with the job (in a properties file).
        :raises InvalidInput: the job's ``conf`` asks for the UI or turns authentication off, or the event
            log's folder is not ours.
        """
        out = dict(conf or {})
        if str(out.get("spark.ui.enabled", "false")).strip().lower() != "false":
            raise InvalidInput("spark.ui.enabled: the Spark UI of an epoch job's driver on this machine would "
                               "answer any local user; it stays off")
        out["spark.ui.enabled"] = "false"
        if str(out.get("spark.eventLog.enabled", "false")).strip().lower() == "true":
            out["spark.eventLog.dir"] = event_log_folder().as_uri()  # never Spark's default /tmp/spark-events
        if mode == "local" or cluster_secret:
            if str(out.get("spark.authenticate", "true")).strip().lower() != "true":
                raise InvalidInput("spark.authenticate: an epoch job's driver on this machine authenticates its "
                                   "RPC; it stays on")
            out["spark.authenticate"] = "true"
        return out

    def run_spark_submit(self, job_context: EpochContext) -> None:
        """Submit through ``SparkSubmitHook`` and wait; the driver writes the manifest into its run directory."""
        hook, folder = self.submit_hook(job_context)
        self._submit_hook = hook
        try:
            if folder is None:
                hook.submit(self.application)
            else:  # a local driver works in the private context folder, never in the worker's working folder
                hook.submit(os.path.abspath(self.application), cwd=folder)
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def run_on_connect(self, job_context: EpochContext) -> dict[str, Any]:
        """Run ``main(spark, job)`` in this process against the Spark Connect server; returns the manifest."""
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        url = SparkConnectHook(conn_id=self.spark_connect_conn_id or "").get_connection_url()
        return run_file_on_connect(url, self.application, job_context, on_session=self._keep_session)

    def _keep_session(self, session: Any) -> None:
        self._connect_session = session

    def on_kill(self) -> None:
        """Stop what runs: the ``spark-submit`` process (and its driver), or the Connect session's jobs."""
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
        session = self._connect_session
        if session is not None:
            session.interruptAll()


def event_log_folder() -> Path:
    """Where an epoch job's driver on this machine writes Spark's event log (``spark.eventLog.enabled``):
    ``[epochs] spark_event_log_dir``, else ``spark-events`` in ``AIRFLOW_HOME``; created 0700 and checked
    like a state folder (ours, not a link, every folder above it ours or root's). Never Spark's default
    ``/tmp/spark-events``, which any local user may create first, own and plant links in.

    :raises InvalidInput: the setting is not an absolute path, or the folder is another user's to change.
    """
    from airflow.configuration import get_airflow_home

    configured = deployment_setting("spark_event_log_dir")
    folder = Path(configured or os.path.join(get_airflow_home(), "spark-events"))
    if not folder.is_absolute():
        raise InvalidInput(f"[epochs] spark_event_log_dir {configured!r} is not an absolute path")
    try:
        return private_dir(folder)
    except (UnsafeState, OSError) as exc:
        raise InvalidInput(f"spark.eventLog.enabled: Spark's event log folder cannot be used: {exc}") from None


def __getattr__(name: str) -> Any:
    """``EpochSparkSubmitHook`` from its own module, imported on first use (see
    :mod:`airflow_epochs.hooks.epoch_spark_submit`)."""
    if name == "EpochSparkSubmitHook":
        from airflow_epochs.hooks.epoch_spark_submit import EpochSparkSubmitHook

        return EpochSparkSubmitHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
