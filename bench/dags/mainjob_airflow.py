"""The main job with Airflow alone (the ``mainjob`` benchmark's first peer): no provider operator.

``mainjob_airflow_daily`` runs the same three Spark jobs as ``nycflights_daily`` on the same Spark
Connect server, ordered the way Airflow's documentation says to order runs whose tasks read what the
run before wrote: ``depends_on_past=True`` (a task runs only once its previous run succeeded),
``wait_for_downstream=True`` (and only once that run's tasks downstream of it did: the join of day e-1
has read the flights of day e-1 before day e's are written) and ``max_active_runs=1`` (one day at a
time), with catch-up over the same days. The jobs write fixed folders per day (``mainjob_peer/jobs.py``).

``mainjob_airflow_report`` is gated with ``ExternalTaskSensor``, Airflow's documented cross-DAG
dependency on the same logical date: the report of day e waits for day e's ``join``. An asset schedule
was not picked: an unpartitioned asset event carries no day, and the scheduler folds the events queued
before a consumer run is created into that one run (days of a catch-up would share a report run). The
sensor is deferrable (no worker slot while it waits) and polls every 5 s (Airflow's default is 60 s):
the peer's best case.

Where it reads and writes: Airflow Variables ``nycflights_raw``, ``mainjob_peer_storage`` and
``mainjob_peer_reports``; Spark: the connection ``nycflights_spark_connect`` names (as the provider's
DAG). ``MAINJOB_PEER_PIPELINE`` names its folder under the storage (two deployments given the same
name write the same folders, as two copies of one DAG would).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.standard.sensors.external_task import ExternalTaskSensor
from airflow.sdk import DAG, Variable, get_current_context, task

ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")
DAYS = int(os.environ.get("NYCFLIGHTS_DAYS", "365"))
PIPELINE = os.environ.get("MAINJOB_PEER_PIPELINE", "nycflights_airflow")
HERE = Path(__file__).resolve().parent


def _settings() -> tuple[str, str, str]:
    """The Spark Connect URL, the storage root and the raw landing zone of this deployment."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    url = SparkConnectHook(conn_id=Variable.get("nycflights_spark_connect")).get_connection_url()
    return url, Variable.get("mainjob_peer_storage"), Variable.get("nycflights_raw")


def _epoch() -> int:
    """Day e of 2013 for this run's logical date (epoch 1 is 2013-01-01)."""
    start = get_current_context()["data_interval_start"]
    assert start is not None
    return int((start - ORIGIN).days) + 1


def _run(partition: str) -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    from mainjob_peer.jobs import run_day

    url, storage, raw = _settings()
    manifest = run_day(url, partition, _epoch(), storage=storage, raw=raw, pipeline=PIPELINE)
    return {"epoch": manifest["epoch"], "seconds": manifest["seconds"],
            "rows": {name: out["rows"] for name, out in manifest["outputs"].items()}}


with DAG(
    dag_id="mainjob_airflow_daily",
    schedule="@daily",
    start_date=ORIGIN,
    end_date=ORIGIN.add(days=DAYS - 1),
    catchup=True,
    max_active_runs=1,
    default_args={"depends_on_past": True, "wait_for_downstream": True, "retries": 2,
                  "retry_delay": timedelta(seconds=5)},
    tags=["bench", "mainjob"],
):

    @task
    def clean_flights() -> dict[str, object]:
        return _run("flights")

    @task
    def hourly_weather() -> dict[str, object]:
        return _run("weather")

    @task
    def join() -> dict[str, object]:
        return _run("daily")

    [clean_flights(), hourly_weather()] >> join()


with DAG(
    dag_id="mainjob_airflow_report",
    schedule="@daily",
    start_date=ORIGIN,
    end_date=ORIGIN.add(days=DAYS - 1),
    catchup=True,
    tags=["bench", "mainjob"],
):
    joined = ExternalTaskSensor(task_id="joined", external_dag_id="mainjob_airflow_daily", external_task_id="join",
                                deferrable=True, poke_interval=5, timeout=6 * 3600)

    @task
    def report() -> dict[str, object]:
        sys.path.insert(0, str(HERE))
        from mainjob_peer.jobs import write_report

        return write_report(Variable.get("mainjob_peer_storage"), PIPELINE, _epoch(),
                            Variable.get("mainjob_peer_reports"))

    joined >> report()
