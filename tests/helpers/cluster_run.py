"""Driving the main job on a running :mod:`cluster_topology` deployment: ``run`` (catch-up over the
days under the real schedulers, then the demo's check and the exactly-once counts) and the faults
(kill -9 of a Celery worker mid-Spark-task, a scheduler, the triggerer holding the asset watcher, the
ZooKeeper leader, a Spark worker mid-job), each with its recovery time.

It works from the deployment's state (:meth:`cluster_topology.Cluster.state`): ports, pids and the
Airflow environment, so ``scripts/cluster.py run`` and ``faults`` drive a cluster another process
supervises, and the system test drives one it started itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_stack import REPO
from cluster_faults import DAG_ID, PIPELINE, REPORT_DAG, SPARK_TASKS, Faults
from cluster_outcome import Fault, Outcome, every_day_reported

sys.path.insert(0, str(REPO / "dags"))

from airflow_epochs.connection.zookeeper import ZooKeeperSettings


def say(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


class Driver(Faults):
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
        self.second: Any = None  # the second deployment (a Cluster), once the fault started it
        self.second_start: threading.Thread | None = None
        self.second_ready = threading.Event()

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    # -- Airflow ---------------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}, **self.state["airflow_env"]}
        return subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        return pg_query(self.state["pg"], sql, *params)

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
            try:
                self.wait_done(started + timeout)
            finally:
                self.finished.set()
            if faults:
                injector.join(max(1.0, started + timeout - time.monotonic()))
            if self.second_start is not None:
                self.second_start.join(max(1.0, started + timeout - time.monotonic()))
                self.second_settled(started + timeout)
            outcome = self.measure()
        finally:
            if self.second is not None:
                self.second.stop()
        outcome.timeline = self.timeline(Path(self.state["base"]))
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
        """Successful report runs per day, in this deployment's database and the second deployment's."""
        sql = "SELECT partition_key, count(*) FROM dag_run WHERE dag_id = %s AND state = 'success' GROUP BY 1"
        found: Counter[int] = Counter()
        for query in (self.query, *self.other_databases()):
            for key, n in query(sql, REPORT_DAG):
                if key is not None and str(key).isdigit():
                    found[int(key)] += int(n)
        return dict(found)

    def other_databases(self) -> list[Callable[..., list[tuple[Any, ...]]]]:
        """The second deployment's database: started by this driver, or by ``faults`` in another process
        (which leaves its state beside ours)."""
        if self.second_up():
            return [self.second.stack.query]
        from airflow_epochs.private_files import read_private

        try:
            state = json.loads(read_private(Path(self.state["base"]) / "second" / "state-second.json", secret=True))
        except FileNotFoundError:
            return []
        return [lambda sql, *params: pg_query(state["pg"], sql, *params)]

    def second_up(self) -> bool:
        """Whether the second deployment is up (its database answers)."""
        return self.second_ready.is_set()

    def wait_done(self, deadline: float) -> None:
        last = (-2, -1)
        while True:
            frontier, runs = self.frontier(), self.report_runs()
            reports = sum(runs.values())
            if (frontier, reports) != last:
                say(f"  frontier {frontier}/{self.days}, report runs {reports}/{self.days}")
                last = (frontier, reports)
            if frontier >= self.days and every_day_reported(runs, self.days):
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
        # the report run of a day is in the database of the deployment whose close emitted the asset events:
        # after a takeover the second's, so both are read (one database alone measured only the days before)
        starts: dict[int, float] = {}
        for query in (self.query, *self.other_databases()):
            for key, at in query("SELECT r.partition_key, min(extract(epoch FROM ti.start_date)) FROM task_instance "
                                 "ti JOIN dag_run r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = "
                                 "%s AND ti.task_id = 'sealed' GROUP BY r.partition_key", REPORT_DAG):
                if key is not None and str(key).isdigit() and at is not None:
                    starts[int(key)] = min(float(at), starts.get(int(key), float(at)))
        outcome.seal_to_downstream_s = {day: at - daily[day] for day, at in starts.items() if day in daily}
        outcome.report_runs = self.report_runs()
        result = self.check()
        per_day: dict[int, bool] = {}
        for row in result.rows:
            per_day[int(row["epoch"])] = per_day.get(int(row["epoch"]), True) and bool(row["equal"])
        exact = [e for e in range(1, self.days + 1) if per_day.get(e)]
        outcome.days_exact = len(exact) / self.days if result.totals and all(t["equal"] for t in result.totals) \
            else 0.0
        outcome.check = result.summary()
        outcome.spark_submit_jobs = self.submitted_jobs()
        return outcome

    def submitted_jobs(self) -> list[str]:
        """The epoch jobs the standalone master ran as applications of their own (spark-submit's; the
        Connect server is one long application), from its UI with the cluster's signed token."""
        from spark_standalone import ui_get, ui_token

        if not self.state.get("spark_master_ui"):
            return []
        status, body = ui_get(int(self.state["spark_master_ui"]), token=ui_token(self.state["spark_ui_key"]))
        if status != 200:
            raise RuntimeError(f"the Spark master's UI answered {status} to our signed token")
        apps = json.loads(body)
        return sorted(f"{app['name']} ({app['state']})" for app in [*apps["activeapps"], *apps["completedapps"]]
                      if app["name"].startswith(f"epochs:{PIPELINE}:"))

    def timeline(self, folder: Path) -> list[str]:
        """Draw the epochs' stages (the Epochs page's timeline renderer) into ``folder``; the files."""
        from airflow_epochs.views.timeline import draw

        paths = [str(folder / "timeline.png"), str(folder / "timeline.html")]
        spans = draw(self.ledger, paths, epochs=list(range(max(1, self.days - 13), self.days + 1)))
        if not {span.epoch for span in spans} >= set(range(max(1, self.days - 13), self.days + 1)):
            raise RuntimeError(f"the timeline misses epochs: {sorted({span.epoch for span in spans})}")
        return paths

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


def pg_query(pg: dict[str, Any], sql: str, *params: object) -> list[tuple[Any, ...]]:
    """``sql``'s rows in the metadata database ``pg`` (a deployment state's ``pg``) names."""
    import psycopg2

    with psycopg2.connect(host="127.0.0.1", port=pg["port"], user=pg["user"], password=pg["password"],
                          dbname="airflow") as conn, conn.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


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
