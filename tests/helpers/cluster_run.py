"""Driving the main job on a running :mod:`cluster_topology` deployment: ``run`` (catch-up over the
days under the real schedulers, then the demo's check and the exactly-once counts) and the faults
(kill -9 of a Celery worker mid-Spark-task, a scheduler, the triggerer holding the asset watcher, the
ZooKeeper leader, a Spark worker mid-job), each with its recovery time.

It works from the deployment's state (:meth:`cluster_topology.Cluster.state`): ports, pids and the
Airflow environment, so ``scripts/cluster.py run`` and ``faults`` drive a cluster another process
supervises, and the system test drives one it started itself.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_stack import REPO
from cluster_outcome import Fault, Outcome

sys.path.insert(0, str(REPO / "dags"))

from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.servers.zookeeper_runtime import four_letter_word

PIPELINE, DAG_ID, REPORT_DAG = "nycflights", "nycflights_daily", "nycflights_report"
# the Spark epoch tasks (in the DAG's EpochGroup "epoch") and the partition each one seals
SPARK_TASKS = {"epoch.clean_flights": "flights", "epoch.hourly_weather": "weather", "epoch.join": "daily"}
ORIGIN = datetime.datetime(2013, 1, 1, tzinfo=datetime.timezone.utc)
ALL_FAULTS = ("celery-worker", "zookeeper-leader", "scheduler", "triggerer", "spark-worker")


def say(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


class Driver:
    """Runs the days on the deployment described by ``state`` (see the module docstring).

    :param refresh: the deployment's state read afresh (a supervisor restarts components: new pids).
    """

    def __init__(self, refresh: Callable[[], dict[str, Any]]) -> None:
        self.refresh = refresh
        self.state = state = refresh()
        self.days = int(state["days"])
        connection = json.loads(state["zookeeper_connection"])
        self.settings = ZooKeeperSettings.from_fields(host=connection["host"], login=connection.get("login"),
                                                      password=connection.get("password"),
                                                      extra=connection.get("extra") or {})
        self.client = self.settings.start_client(timeout=30)
        from airflow_epochs.coordination import EpochLedger

        self.ledger = EpochLedger(self.client, PIPELINE, owner="cluster-watch")
        self.faults: list[Fault] = []
        self.fault_errors: list[str] = []
        self.finished = threading.Event()  # the days are done: a fault still waiting for its moment gives up

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    # -- Airflow ---------------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}, **self.state["airflow_env"]}
        return subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        import psycopg2

        pg = self.state["pg"]
        with psycopg2.connect(host="127.0.0.1", port=pg["port"], user=pg["user"], password=pg["password"],
                              dbname="airflow") as conn, conn.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def history(self) -> list[Any]:
        from airflow_epochs.coordination import PipelineNotFound
        from airflow_epochs.retries import Backoff, call_with_retries

        try:
            return list(call_with_retries(self.ledger.history, backoff=Backoff(budget=60)))
        except PipelineNotFound:
            return []

    # -- the run ---------------------------------------------------------------------------------

    def run(self, faults: tuple[str, ...] = (), timeout: float = 900) -> Outcome:
        from nycflights.data import day_of_epoch, land_days

        started = time.monotonic()
        data = Path(self.state["data"])
        land_days(data / "raw", [day_of_epoch(e) for e in range(1, self.days + 1)])
        for dag_id in (REPORT_DAG, DAG_ID):
            done = self.airflow("dags", "unpause", dag_id)
            if done.returncode:
                raise RuntimeError(f"airflow dags unpause {dag_id}: {done.stderr[-2000:]}")
        say(f"{DAG_ID} unpaused: the schedulers run days 1..{self.days} (catch-up), {REPORT_DAG} follows each seal")
        injector = threading.Thread(target=self.inject, args=(faults,), name="faults", daemon=True)
        if faults:
            injector.start()
        try:
            self.wait_done(started + timeout)
        finally:
            self.finished.set()
        if faults:
            injector.join(max(1.0, started + timeout - time.monotonic()))
        outcome = self.measure()
        outcome.seconds = time.monotonic() - started
        return outcome

    def frontier(self) -> int:
        from airflow_epochs.coordination import PipelineNotFound

        try:
            return int(self.ledger.frontier())
        except PipelineNotFound:
            return 0
        except Exception:  # noqa: BLE001 - a ZooKeeper election in progress: asked again
            return -1

    def report_runs(self) -> dict[int, int]:
        rows = self.query("SELECT partition_key, count(*) FROM dag_run WHERE dag_id = %s AND state = 'success' "
                          "GROUP BY partition_key", REPORT_DAG)
        return {int(key): int(n) for key, n in rows if key is not None and str(key).isdigit()}

    def wait_done(self, deadline: float) -> None:
        last = (-2, -1)
        while True:
            frontier, reports = self.frontier(), sum(self.report_runs().values())
            if (frontier, reports) != last:
                say(f"  frontier {frontier}/{self.days}, report runs {reports}/{self.days}")
                last = (frontier, reports)
            if frontier >= self.days and reports >= self.days:
                return
            failed = self.query("SELECT run_id FROM dag_run WHERE dag_id IN (%s, %s) AND state = 'failed'",
                                DAG_ID, REPORT_DAG)
            if failed:
                raise RuntimeError(f"DAG runs failed: {failed}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"frontier {frontier}/{self.days}, report runs {reports}/{self.days}")
            time.sleep(2)

    # -- figures ---------------------------------------------------------------------------------

    def measure(self) -> Outcome:
        outcome = Outcome(self.state["deployment"], self.days, faults=self.faults)
        events = self.history()
        seals = Counter((e.detail.get("epoch"), e.detail.get("partition")) for e in events
                        if e.event == "partition_sealed")
        wanted = {(epoch, partition) for epoch in range(1, self.days + 1) for partition in SPARK_TASKS.values()}
        outcome.duplicate_seals = sum(n - 1 for n in seals.values() if n > 1)
        outcome.duplicate_seals += sum(n - 1 for n in Counter(e.detail.get("epoch") for e in events
                                                              if e.event == "epoch_sealed").values() if n > 1)
        outcome.missing_seals = len(wanted - set(seals))
        opened = {e.detail["epoch"]: e.at for e in events if e.event == "epoch_opened"}
        sealed = {e.detail["epoch"]: e.at for e in events if e.event == "epoch_sealed"}
        outcome.epoch_s = {e: sealed[e] - opened[e] for e in opened if e in sealed}
        daily = {e.detail["epoch"]: e.at for e in events if e.event == "partition_sealed"
                 and e.detail.get("partition") == "daily"}
        starts = self.query("SELECT r.partition_key, min(extract(epoch FROM ti.start_date)) FROM task_instance ti "
                            "JOIN dag_run r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s "
                            "AND ti.task_id = 'sealed' GROUP BY r.partition_key", REPORT_DAG)
        outcome.seal_to_downstream_s = {int(k): float(at) - daily[int(k)] for k, at in starts
                                        if k is not None and str(k).isdigit() and int(k) in daily and at is not None}
        outcome.report_runs = self.report_runs()
        result = self.check()
        per_day: dict[int, bool] = {}
        for row in result.rows:
            per_day[int(row["epoch"])] = per_day.get(int(row["epoch"]), True) and bool(row["equal"])
        exact = [e for e in range(1, self.days + 1) if per_day.get(e)]
        outcome.days_exact = len(exact) / self.days if result.totals and all(t["equal"] for t in result.totals) \
            else 0.0
        outcome.check = result.summary()
        return outcome

    def check(self) -> Any:
        """The demo's check: the sealed figures against one Spark computation over the same days."""
        from nycflights.check import check_sealed
        from nycflights.data import day_of_epoch
        from pyspark.sql.connect.session import SparkSession

        from airflow_epochs.spark.connect import client_url, connect_mode

        with connect_mode():
            spark = SparkSession.builder.remote(client_url(self.state["spark_connect"])).create()
            try:
                return check_sealed(spark, self.ledger, Path(self.state["data"]) / "raw",
                                    [day_of_epoch(e) for e in range(1, self.days + 1)])
            finally:
                spark.stop()

    # -- faults ----------------------------------------------------------------------------------

    def inject(self, faults: tuple[str, ...]) -> None:
        for name in faults:
            try:
                getattr(self, "fault_" + name.replace("-", "_"))()
            except Exception as exc:  # noqa: BLE001 - reported with the run's figures, never silent
                self.fault_errors.append(f"{name}: {type(exc).__name__}: {exc}")
                say(f"fault {name} could not be injected: {exc}")

    def kill(self, name: str) -> int:
        """kill -9 every process of component ``name``'s session (each component leads its own; a Celery
        worker's task processes have process groups of their own in it): its host crashed. Done once its
        pid is checked to be the process that was started (a pid read from the state may have been reused)."""
        from airflow_epochs.process_identity import NotOurProcess, ProcessIdentity

        state = self.refresh()
        pid = int(state["components"][name])
        recorded = state["identities"].get(name)
        if recorded is None or not ProcessIdentity.from_json(recorded).alive():
            raise NotOurProcess(f"{name} (pid {pid}) is not the process the cluster started; not killing it")
        for member in _session(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        return pid

    def components(self) -> dict[str, int]:
        return dict(self.refresh()["components"])

    def running_spark_task(self, min_seconds: float = 3.0, timeout: float = 600) -> tuple[int, str, int]:
        """(epoch, task id, pid) of a Spark epoch task running for ``min_seconds`` at least."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.finished.is_set():
            rows = self.query("SELECT r.logical_date, ti.task_id, ti.pid FROM task_instance ti JOIN dag_run r ON "
                              "r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND ti.state = "
                              "'running' AND ti.task_id = ANY(%s) AND ti.pid IS NOT NULL AND ti.start_date < "
                              "now() - make_interval(secs => %s)", DAG_ID, list(SPARK_TASKS), min_seconds)
            for logical, task, pid in rows:
                return (logical - ORIGIN).days + 1, str(task), int(pid)
            time.sleep(0.5)
        raise TimeoutError("no Spark epoch task ran while the fault waited (too few days for every fault?)")

    def wait_sealed(self, epoch: int, partition: str, since: float, timeout: float = 600) -> float:
        """Seconds from ``since`` (wall clock) to the seal of (epoch, partition)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.history():
                if event.event == "partition_sealed" and event.detail.get("epoch") == epoch and \
                        event.detail.get("partition") == partition:
                    return max(0.0, event.at - since)
            time.sleep(1)
        raise TimeoutError(f"({epoch}, {partition}) not sealed")

    def supervisor_note(self, name: str, since: float) -> str:
        return f"{name}, by the cluster's supervisor (as systemd would)"

    def fault_celery_worker(self) -> None:
        """kill -9 the Celery worker running a Spark epoch task; recovered: that partition sealed."""
        epoch, task, pid = self.running_spark_task()
        lineage = _ancestors(pid)  # the task process runs in a session of its own, under the worker's tree
        worker = next((n for n, p in self.components().items() if p in lineage and n.startswith("celery-worker")),
                      None)
        if worker is None:
            raise RuntimeError(f"task {task} (pid {pid}) runs in no Celery worker's process group")
        fault = Fault("celery worker killed mid-Spark-task", worker, time.time(), f"epoch {epoch} {task}")
        self.kill(worker)
        say(f"fault: kill -9 {worker} while it runs {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(worker, fault.at)
        fault.recovered_s = self.wait_sealed(epoch, SPARK_TASKS[task], fault.at)
        say(f"fault: ({epoch}, {SPARK_TASKS[task]}) sealed {fault.recovered_s:.1f} s after the kill")

    def zookeeper_leader(self) -> int | None:
        ca = self.state["zookeeper"]["ca"]
        for member in self.state["zookeeper"]["members"]:
            if "Mode: leader" in four_letter_word(member["port"], ca=ca, timeout=2.0):
                return int(member["myid"])
        return None

    def fault_zookeeper_leader(self) -> None:
        """kill -9 the ensemble's leader during a Spark task; recovered: a write commits again."""
        epoch, task, _ = self.running_spark_task(min_seconds=1.0)
        leader = self.zookeeper_leader()
        if leader is None:
            raise RuntimeError("no ZooKeeper leader")
        fault = Fault("ZooKeeper leader killed", f"zookeeper-{leader}", time.time(), f"during epoch {epoch} {task}")
        self.kill(f"zookeeper-{leader}")
        say(f"fault: kill -9 the ZooKeeper leader (member {leader}) during {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(f"zookeeper-{leader}", fault.at)
        probe = "/cluster-probe"
        while True:
            try:
                self.client.ensure_path(probe)
                self.client.set(probe, str(time.time()).encode())
                break
            except Exception:  # noqa: BLE001 - the election: asked again
                time.sleep(0.2)
        fault.recovered_s = time.time() - fault.at
        say(f"fault: the ensemble commits again {fault.recovered_s:.1f} s after the leader's kill")

    def fault_scheduler(self) -> None:
        """kill -9 one scheduler the moment a Spark task ends; recovered: the next task of that run is queued
        (by the other scheduler, or by the restarted one)."""
        epoch, task, _ = self.running_spark_task(min_seconds=0.0)
        run = self.query("SELECT run_id FROM dag_run WHERE dag_id = %s AND logical_date = %s", DAG_ID,
                         ORIGIN + datetime.timedelta(days=epoch - 1))[0][0]
        self._until(lambda: self.query("SELECT 1 FROM task_instance WHERE dag_id = %s AND run_id = %s AND task_id = "
                                       "%s AND state <> 'running'", DAG_ID, run, task), 900)
        fault = Fault("scheduler killed", "scheduler", time.time(), f"as {task} of epoch {epoch} ended")
        self.kill("scheduler")
        say(f"fault: kill -9 scheduler as {task} of epoch {epoch} ends (scheduler-2 keeps scheduling)")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note("scheduler", fault.at)
        fault.recovered_s = self._until(lambda: self.query(
            "SELECT 1 FROM task_instance WHERE dag_id = %s AND run_id = %s AND queued_dttm > to_timestamp(%s)",
            DAG_ID, run, fault.at), 600) - fault.at
        say(f"fault: the next task of epoch {epoch} queued {fault.recovered_s:.1f} s after the scheduler's kill")

    def trigger_owner(self) -> tuple[str | None, int | None]:
        """(component, job id) of the triggerer running most of the deferred tasks' triggers: a job is the
        process of the name whose latest start came last before the job started."""
        rows = self.query("SELECT j.id, j.start_date FROM trigger t JOIN job j ON j.id = t.triggerer_id WHERE "
                          "j.state = 'running' GROUP BY j.id, j.start_date ORDER BY count(*) DESC LIMIT 1")
        if not rows:
            return None, None
        spawned = self.refresh()["spawned_at"]
        before = [(at, n) for n, at in spawned.items() if n.startswith("triggerer") and at <= rows[0][1].timestamp()]
        return (max(before)[1] if before else None), int(rows[0][0])

    def fault_triggerer(self) -> None:
        """kill -9 the triggerer running the deferred tasks' triggers (epoch opening, barrier, sealed
        sensor); recovered: none of them is left on the dead triggerer's job."""
        self._until(lambda: self.trigger_owner()[0] is not None, 900)
        name, job = self.trigger_owner()
        assert name is not None
        fault = Fault("triggerer with the deferred triggers killed", name, time.time(), f"trigger job {job}")
        self.kill(name)
        say(f"fault: kill -9 {name}, which runs the deferred tasks' triggers (job {job})")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(name, fault.at)
        fault.recovered_s = self._until(lambda: not self.query(
            "SELECT 1 FROM trigger WHERE triggerer_id = %s", job), 600) - fault.at
        say(f"fault: the triggers left {name}'s job {fault.recovered_s:.1f} s after the kill")

    def fault_spark_worker(self) -> None:
        """kill -9 a Spark worker (and its executor) mid-job; recovered: that partition sealed."""
        epoch, task, _ = self.running_spark_task(min_seconds=1.0)
        fault = Fault("Spark worker killed mid-job", "spark-worker-1", time.time(), f"epoch {epoch} {task}")
        self.kill("spark-worker-1")
        say(f"fault: kill -9 spark-worker-1 during {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note("spark-worker-1", fault.at)
        fault.recovered_s = self.wait_sealed(epoch, SPARK_TASKS[task], fault.at)

    def _until(self, predicate: Callable[[], Any], timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return time.time()
            time.sleep(0.5)
        raise TimeoutError("not recovered")


def _session(sid: int) -> list[int]:
    """The processes of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # state, ppid, pgrp, session
                found.append(int(entry.name))
    return found


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its parents, up to init."""
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # the field after the state: the parent's pid
    return found


def run_local(base: Path, shared: dict[str, Any], timeout: float) -> Outcome:
    """The same days on a LocalExecutor deployment (one scheduler and triggerer) on ``shared``'s
    ensemble and Spark, with its own ZooKeeper chroot, metadata database and data folder in ``base``."""
    from cluster_topology import Cluster

    local = Cluster(base, days=int(shared["days"]), executor="local", deployment="local", shared=shared)
    try:
        local.start()
        driver = Driver(local.state)
        try:
            return driver.run(timeout=timeout)
        finally:
            driver.close()
    finally:
        local.stop()
