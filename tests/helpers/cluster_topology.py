"""The production topology on loopback (issue 36), each component its own processes, folder and port:

- a 3-node ZooKeeper ensemble, mutual TLS only, digest authentication (the embedded distribution's classes);
- a Spark standalone master and workers (``spark-class`` from the pyspark wheel) and a Spark Connect server on
  that master, sharing one ``spark.authenticate`` secret (0600 files), UIs behind a signed token
  (:mod:`spark_standalone`); a Celery worker in ``submit_workers`` uses ``spark-submit`` onto the master;
- PostgreSQL (Debian's, password authentication) and Redis (password, 127.0.0.1 only) as the Celery broker;
- Airflow: API server, DAG processor, schedulers, triggerers and Celery workers (or one scheduler and
  triggerer with the LocalExecutor, for the comparison), one Fernet key and JWT/API secret for all; each
  Celery worker in its own working, temporary and log folders; logs served as :mod:`cluster_logs` says.

Everything lives under ``base`` (0700, ours), one folder a component, except PostgreSQL's data (see
:mod:`airflow_stack`). :meth:`Cluster.write_state` records the pids, ports and Airflow environment (0600).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from airflow_stack import REPO, _free_port
from celery_stack import CeleryStack
from cluster_logs import TRIGGERERS, log_server_argv, serving_env, triggerer_address, worker_address
from cluster_processes import stop_group, wait_ready
from postgres_server import PostgresServer
from spark_standalone import daemon_properties, new_ui_key

from airflow_epochs.connection.credentials import CREDENTIALS_FILE, TLS_FOLDER
from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.private_files import open_private_log, private_dir, read_private, write_private
from airflow_epochs.process_identity import NONCE_ENV, identify, launch_environment
from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer, listening, spark_home
from airflow_epochs.servers.embedded_zookeeper import ServerTls, ZooKeeperEnsemble, find_java
from airflow_epochs.servers.secured_zookeeper import load_or_create_auth
from airflow_epochs.servers.zookeeper_security import ensure_certificates

DAG_FILES = [REPO / "dags" / "nycflights_pipeline.py", REPO / "dags" / "nycflights_report.py",
             REPO / "dags" / "nycflights", REPO / "dags" / ".airflowignore"]
# What a process supervisor (systemd, Kubernetes) restarts; PostgreSQL and Redis are left to their operators.
SUPERVISED = ("zookeeper-", "spark-master", "spark-worker-", "spark-connect", "scheduler", "triggerer",
              "celery-worker-", "worker-logs-", "trigger-logs-", "api-server", "dag-processor")


def say(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


class Cluster:
    """One deployment's topology in ``base``; ``start()``, ``supervise_once()``, ``stop()``.

    :param executor: ``celery`` (two schedulers, two triggerers, two Celery workers) or ``local``
        (one scheduler and triggerer with the LocalExecutor, on the same ZooKeeper and Spark).
    :param days: the catch-up the DAG covers (``NYCFLIGHTS_DAYS``).
    :param shared: another deployment's state (:meth:`state`): use its ZooKeeper ensemble and Spark
        instead of starting them.
    :param same_pipeline: with ``shared``, run that deployment's pipeline (its ZooKeeper chroot and its
        storage) instead of one of our own: a second deployment of the same DAG.
    :param submit_workers: the Celery workers whose Spark route is ``spark-submit`` onto the standalone
        master (the Variables in their environment say so); the others use the Spark Connect server.
    :param workers: Celery workers (and schedulers and triggerers: two each, or one when ``workers`` is 1).
    """

    def __init__(self, base: Path, *, days: int, executor: str = "celery", deployment: str = "celery",
                 shared: dict[str, Any] | None = None, same_pipeline: bool = False,
                 submit_workers: tuple[int, ...] = (), workers: int = 2) -> None:
        if executor not in ("celery", "local"):
            raise ValueError(f"executor must be 'celery' or 'local', not {executor!r}")
        if same_pipeline and shared is None:
            raise ValueError("same_pipeline needs the other deployment's state (shared)")
        self.home = shared["deployment"] if same_pipeline and shared else deployment  # the pipeline's chroot
        self.shared_data = Path(shared["data"]) if same_pipeline and shared else None
        self.submit_workers = submit_workers
        self.celery_workers = workers
        self.base = private_dir(base)
        self.days = days
        self.executor = executor
        self.deployment = deployment
        self.ensemble: ZooKeeperEnsemble | None = None
        self.shared = shared
        self.own_zookeeper = shared is None
        self.spark = (shared["spark_connect"], shared["spark_master"]) if shared else None  # (Connect URL, master)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.launches: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        self.connect: SparkConnectServer | None = None
        self.stack: CeleryStack | None = None
        self.restarts: list[tuple[float, str]] = []
        self.lock = threading.RLock()  # a supervisor thread restarts components while a driver reads state()
        self.secrets = self._secrets()
        self.log_port = _free_port()  # every worker's log server's, and the API server's to fetch from
        self.trigger_log_port = _free_port()  # every triggerer's log server's
        if shared:  # the Spark cluster's secrets are the other deployment's
            self.secrets.update(spark=shared["spark_secret"], spark_ui=shared["spark_ui_key"])
            self.master_ui = int(shared["spark_master_ui"])

    # -- secrets and folders ---------------------------------------------------------------------

    def _secrets(self) -> dict[str, str]:
        path = self.base / "secrets.json"
        with contextlib.suppress(FileNotFoundError):
            return dict(json.loads(read_private(path, secret=True)))
        from cryptography.fernet import Fernet

        values = {"fernet": Fernet.generate_key().decode(), "jwt": secrets.token_urlsafe(64),
                  "api": secrets.token_urlsafe(64), "redis": secrets.token_hex(24), "spark": secrets.token_hex(32),
                  "spark_ui": new_ui_key()}
        write_private(path, json.dumps(values))
        return values

    def folder(self, name: str) -> Path:
        return private_dir(self.base / name)

    @property
    def data(self) -> Path:
        return self.shared_data or self.folder(f"data-{self.deployment}")

    # -- ZooKeeper -------------------------------------------------------------------------------

    def start_zookeeper(self) -> None:
        folder = self.folder("zookeeper")
        auth = load_or_create_auth(folder / CREDENTIALS_FILE)
        certificates = ensure_certificates(folder / TLS_FOLDER)
        tls = ServerTls(certificates.server_keystore, certificates.ca, client_auth="need",  # mutual TLS
                        client_cert=certificates.client_cert, client_key=certificates.client_key)
        self.ensemble = ZooKeeperEnsemble(3, directory=folder, tls=tls, auth=auth, plaintext_port=False)
        self.ensemble.start(timeout=120)

    def zookeeper_settings(self) -> ZooKeeperSettings:
        """The ensemble's client settings inside this deployment's chroot (created here)."""
        if self.shared is not None:
            whole = ZooKeeperSettings.from_fields(**json.loads(self.shared["zookeeper_admin"]))
        else:
            assert self.ensemble is not None
            whole = self.ensemble.client_settings()
        client = whole.start_client(timeout=30)
        try:
            client.ensure_path(f"/deployments/{self.home}")
        finally:
            client.stop()
            client.close()
        return ZooKeeperSettings.from_fields(host=whole.connect_string + f"/deployments/{self.home}",
                                             login=whole.login, password=whole.password, extra=_tls_extra(whole))

    # -- Spark and Redis -------------------------------------------------------------------------

    def _launch(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.launches[name] = (argv, env, cwd)
        with open(open_private_log(cwd / f"{name}.log"), "ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=launch_environment(env), cwd=cwd, start_new_session=True,
                                                umask=0o077)

    def _spark_env(self) -> dict[str, str]:
        home = spark_home()
        return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
                "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(find_java()).resolve().parent.parent)}

    def prepare_spark(self, workers: int = 2) -> None:
        """Choose the Spark cluster's ports and its Connect server (whose URL the Airflow settings name)."""
        self.workers = workers
        self.master_port, self.master_ui = _free_port(), _free_port()
        self.connect = SparkConnectServer(self.folder("spark-connect"), master=f"spark://127.0.0.1:{self.master_port}",
                                          auth_secret=self.secrets["spark"], conf={
                                              "spark.executor.memory": "768m", "spark.executor.cores": "1",
                                              "spark.cores.max": str(workers),
                                              "spark.executorEnv.PYSPARK_PYTHON": sys.executable})
        self.spark = (self.connect.url, f"spark://127.0.0.1:{self.master_port}")

    def start_spark(self) -> None:
        """Start what :meth:`prepare_spark` chose: the master, the workers, then the Connect server."""
        assert self.connect is not None
        master_dir = self.folder("spark-master")
        # Master, workers, the Connect server's driver and spark-submit's drivers share this secret (a SASL
        # handshake on every RPC connection); the UIs want a JWS (see spark_standalone); 0600 files only.
        props = write_private(master_dir / "spark-auth.properties",
                              daemon_properties(self.secrets["spark"], self.secrets["spark_ui"]))
        spark_class = str(spark_home() / "bin" / "spark-class")
        self._launch("spark-master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(self.master_port), "--webui-port", str(self.master_ui),
                                      "--properties-file", str(props)], self._spark_env(), master_dir)
        wait_ready(lambda: listening(self.master_port), 120, "the Spark master", self, "spark-master")
        for index in range(1, self.workers + 1):
            folder = self.folder(f"spark-worker-{index}")
            worker_props = write_private(folder / "spark-auth.properties", Path(props).read_text())
            env = {**self._spark_env(), "SPARK_LOCAL_DIRS": str(self.folder(f"spark-worker-{index}/local"))}
            self._launch(f"spark-worker-{index}", [
                spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{self.master_port}",
                "--host", "127.0.0.1", "--port", str(_free_port()), "--webui-port", str(_free_port()),
                "--cores", "2", "--memory", "3g", "--work-dir", str(self.folder(f"spark-worker-{index}/work")),
                "--properties-file", str(worker_props)], env, folder)
        self.connect.start()

    def start_redis(self) -> str:
        folder = self.folder("redis")
        port = _free_port()
        conf = write_private(folder / "redis.conf", "\n".join([
            "bind 127.0.0.1", f"port {port}", "protected-mode yes", f"requirepass {self.secrets['redis']}",
            f"dir {folder}", 'save ""', "appendonly no", "daemonize no", f"logfile {folder / 'redis.log'}", ""]))
        redis = shutil.which("redis-server") or "/usr/bin/redis-server"
        self._launch("redis", [redis, str(conf)], dict(os.environ), folder)
        wait_ready(lambda: listening(port), 30, "Redis", self, "redis")
        return f"redis://:{self.secrets['redis']}@127.0.0.1:{port}/0"

    # -- Airflow ---------------------------------------------------------------------------------

    def airflow_env(self, settings: ZooKeeperSettings) -> dict[str, str]:
        from airflow_epochs.servers.secured_zookeeper import airflow_connection

        assert self.spark is not None
        host, _, rest = self.spark[0][len("sc://"):].partition("/")
        data = self.data
        return {
            "AIRFLOW__CORE__FERNET_KEY": self.secrets["fernet"],
            "AIRFLOW__API_AUTH__JWT_SECRET": self.secrets["jwt"],
            "AIRFLOW__API__SECRET_KEY": self.secrets["api"],
            # a dead worker's task is noticed after this many seconds without its heartbeat (default 300)
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            # a task's calls wait as long as the API server's own request timeout (Airflow's 5 s failed task
            # starts under load: the abandoned start is applied, its retry refused; see airflow_stack.py)
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "120",
            # A task whose Celery message a killed worker had reserved (not started) stays queued: Redis gives
            # it back only after the visibility timeout (6 h in Airflow's settings). The scheduler re-queues a
            # task queued this long (seconds), up to this many times, instead.
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
            "AIRFLOW__SCHEDULER__NUM_STUCK_IN_QUEUED_RETRIES": "10",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
            # a dead triggerer's triggers move to a live one after this many seconds without its heartbeat
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "15",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.log_port),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.trigger_log_port),
            "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps(airflow_connection(settings)),
            "AIRFLOW_CONN_SPARK_CONNECT_CLUSTER": json.dumps({
                "conn_type": "spark_connect", "host": host.rpartition(":")[0], "port": int(host.rpartition(":")[2]),
                "password": rest.partition("token=")[2]}),
            # the standalone master, for spark-submit: the cluster's secret is the connection's password
            "AIRFLOW_CONN_SPARK_STANDALONE": json.dumps({
                "conn_type": "spark", "host": "127.0.0.1", "port": int(self.spark[1].rpartition(":")[2]),
                "password": self.secrets["spark"]}),
            "AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONNECT": "spark_connect_cluster",
            "AIRFLOW_VAR_NYCFLIGHTS_RAW": str(data / "raw"),
            "AIRFLOW_VAR_NYCFLIGHTS_STORAGE": str(data / "lake"),
            "AIRFLOW_VAR_NYCFLIGHTS_REPORTS": str(data / "reports"),
            "AIRFLOW_EPOCHS_DEPLOYMENT": self.deployment,
            "AIRFLOW_EPOCHS_DATA": str(data),
            "NYCFLIGHTS_DAYS": str(self.days),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",
        }

    def start_airflow(self, settings: ZooKeeperSettings, broker: str | None) -> None:
        triggerers = TRIGGERERS[:2 if self.executor == "celery" and self.celery_workers > 1 else 1]
        serving = {name: serving_env(triggerer_address(i), self.folder(f"trigger-logs-{i}/logs"))
                   for i, name in enumerate(triggerers, 1)}
        self.stack = CeleryStack(self.folder("airflow"), env=self.airflow_env(settings), broker=broker,
                                 component_env=serving)  # each triggerer's hostname: its log server's address
        self.stack.start(DAG_FILES)
        for i, name in enumerate(triggerers, 1):  # Airflow's own would bind every interface (see spawn)
            if name != "triggerer":
                self.stack.spawn(name, ["triggerer"])
            address = serving[name]["AIRFLOW_EPOCHS_LOG_SERVER_HOST"]
            self._launch(f"trigger-logs-{i}", log_server_argv("triggerer", address, self.trigger_log_port),
                         {**self.stack.env, **serving[name]}, self.folder(f"trigger-logs-{i}"))
        if self.executor == "celery":
            if self.celery_workers > 1:
                self.stack.spawn("scheduler-2", ["scheduler"])
            indexes = range(1, self.celery_workers + 1)
            for index in indexes:
                self.start_worker(index)
            for index in indexes:  # Celery says "ready" once connected to the broker
                name = f"celery-worker-{index}"
                wait_ready(lambda name=name: b" ready." in (self.stack.base / f"{name}.log").read_bytes(), 180,
                      f"Celery worker {index}", self, name)
        self.stack.wait_for_dags(["nycflights_daily", "nycflights_report"], timeout=300)

    def worker_env(self, index: int) -> tuple[dict[str, str], Path]:
        assert self.stack is not None
        folder = self.folder(f"celery-worker-{index}")
        # Nothing on local disk shared with another process: its own working, temporary and log folders, the
        # logs served by a log server of ours on its own loopback address (the API server asks the task's
        # hostname on one port setting; Airflow's serve_logs would bind every interface).
        env = {**self.stack.env, "TMPDIR": str(self.folder(f"celery-worker-{index}/tmp")),
               "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.folder(f"celery-worker-{index}/logs")),
               **serving_env(worker_address(index))}
        if index in self.submit_workers:  # its epoch tasks go through spark-submit onto the standalone master
            env.update(AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONNECT="", AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONN="spark_standalone")
        return env, folder

    def start_worker(self, index: int) -> None:
        assert self.stack is not None
        env, folder = self.worker_env(index)
        self.stack.spawn(f"celery-worker-{index}", ["celery", "worker", "--concurrency", "2", "--skip-serve-logs",
                         "--celery-hostname", f"worker-{index}@{self.deployment}"], env=env, cwd=folder)
        self._launch(f"worker-logs-{index}", log_server_argv("worker", worker_address(index), self.log_port), env,
                     folder)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Cluster:
        started = time.monotonic()
        if self.own_zookeeper:
            say("starting a 3-node ZooKeeper ensemble (mutual TLS only, digest authentication)")
            self.start_zookeeper()
        settings = self.zookeeper_settings()
        spark: threading.Thread | None = None
        failed: list[BaseException] = []
        if self.spark is None:
            say("starting Spark: a standalone master, two workers (2 cores, 3 GB each) and a Spark Connect server "
                "on that master (spark.authenticate; UIs behind a signed token), beside Airflow's start")
            self.prepare_spark()

            def start_spark() -> None:
                try:
                    self.start_spark()
                except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller's thread
                    failed.append(exc)

            spark = threading.Thread(target=start_spark, name="spark-start", daemon=True)
            spark.start()
        broker = None
        if self.executor == "celery":
            say("starting Redis (password, 127.0.0.1) as the Celery broker")
            broker = self.start_redis()
        say(f"starting PostgreSQL and Airflow ({self.executor}) in {self.base / 'airflow'}")
        self.start_airflow(settings, broker)
        if spark is not None:
            spark.join()
            if failed:
                raise failed[0]
        say(f"up after {time.monotonic() - started:.0f} s")
        return self

    def components(self) -> dict[str, int]:
        """Every running component's pid (its process group)."""
        found = {name: proc.pid for name, proc in self.procs.items() if proc.poll() is None}
        if self.own_zookeeper and self.ensemble is not None:
            found.update({f"zookeeper-{m.myid}": m.process.pid for m in self.ensemble.members if m.running()
                          and m.process is not None})
        if self.connect is not None and self.connect.pid is not None and self.connect.serving():
            found["spark-connect"] = self.connect.pid
        if self.stack is not None:
            found.update({name: p.pid for name, p in self.stack.procs.items() if p.poll() is None})
        return found

    def supervise_once(self) -> list[str]:
        """Restart what a process supervisor would restart and is no longer running; the names restarted."""
        with self.lock:
            return self._supervise_once()

    def held(self) -> set[str]:
        """What an operator stopped (``held.json``, see cluster_faults): left stopped, as systemd leaves a unit."""
        with contextlib.suppress(FileNotFoundError):
            return set(json.loads(read_private(self.base / "held.json")))
        return set()

    def _supervise_once(self) -> list[str]:
        done, held = [], self.held()
        if self.own_zookeeper and self.ensemble is not None:
            for index, member in enumerate(self.ensemble.members):
                if member.process is not None and not member.running():
                    self.ensemble.restart(index)
                    done.append(f"zookeeper-{member.myid}")
        for name, proc in list(self.procs.items()):
            if proc.poll() is not None and name.startswith(SUPERVISED) and name not in held:
                self._launch(name, *self.launches[name])
                done.append(name)
        if self.stack is not None:
            for name, proc in list(self.stack.procs.items()):
                if proc.poll() is not None and name.startswith(SUPERVISED) and name not in held:
                    self.stack.respawn(name)
                    done.append(name)
        self.restarts += [(time.time(), name) for name in done]
        return done

    def state(self) -> dict[str, Any]:
        with self.lock:
            return self._state()

    def _state(self) -> dict[str, Any]:
        members = self.ensemble.members if self.ensemble is not None else []
        tls = self.ensemble.tls if self.ensemble is not None else None
        components = self.components()
        whole = self.ensemble.client_settings() if self.ensemble is not None else None
        return {
            "deployment": self.deployment, "executor": self.executor, "days": self.days,
            "supervisor": os.getpid(), "components": components,
            "identities": {name: identity.to_json() for name, pid in components.items()
                           if (identity := identify(pid)) is not None},
            "zookeeper": {"members": [{"myid": m.myid, "port": m.client_port} for m in members],
                          **(tls.client_files() if tls else {})},  # ca, certfile, keyfile
            "zookeeper_admin": json.dumps({"host": whole.connect_string, "login": whole.login,
                                           "password": whole.password, "extra": _tls_extra(whole)})
            if whole is not None else (self.shared or {}).get("zookeeper_admin"),
            "spark_master": self.spark[1] if self.spark else None,
            "spark_master_ui": getattr(self, "master_ui", None), "spark_secret": self.secrets["spark"],
            "spark_ui_key": self.secrets["spark_ui"], "submit_workers": list(self.submit_workers),
            "spawned_at": dict(self.stack.spawned_at),
            "zookeeper_connection": self.stack.extra_env["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"],
            "spark_connect": self.spark[0] if self.spark else None,
            "api": f"http://127.0.0.1:{self.stack.api_port}",
            "pg": {"port": self.stack.pg_port, "user": PostgresServer.user, "password": self.stack.db_password},
            "airflow_env": {k: v for k, v in self.stack.env.items()
                            if k.startswith(("AIRFLOW", "NYCFLIGHTS")) and k != NONCE_ENV},
            "data": str(self.data), "base": str(self.base), "logs": str(self.stack.base), "restarts": self.restarts,
        }

    def write_state(self) -> Path:
        return write_private(self.base / f"state-{self.deployment}.json", json.dumps(self.state()))

    def stop(self) -> None:
        """Stop everything: every process is told at once, then each is waited for (one by one took minutes)."""
        with self.lock:
            airflow = [p for n, p in (self.stack.procs.items() if self.stack else ()) if n != "postgres"]
            told = [*((p, signal.SIGINT) for p in airflow), *((p, signal.SIGTERM) for p in self.procs.values())]
            for proc, sig in told:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
        if self.stack is not None:
            self.stack.stop()
        for name, proc in reversed(list(self.procs.items())):
            stop_group(proc)
            self.procs.pop(name)
        if self.connect is not None:
            self.connect.stop()
        if self.own_zookeeper and self.ensemble is not None:
            self.ensemble.stop()
        with contextlib.suppress(FileNotFoundError):
            (self.base / f"state-{self.deployment}.json").unlink()


def _tls_extra(settings: ZooKeeperSettings) -> dict[str, Any]:
    return {"use_tls": True, "ca": settings.ca, "certfile": settings.certfile, "keyfile": settings.keyfile}
