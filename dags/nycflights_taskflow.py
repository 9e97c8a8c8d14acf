"""The main example (``dags/nycflights_pipeline.py``) in TaskFlow style: the same three Spark jobs, partitions,
barrier and running totals, as the pipeline ``nycflights_taskflow`` (its epochs and its storage folders are
its own). Each ``@task.spark_epoch`` function returns its job's inputs for the run's day; ``join`` names the
sealed partitions it reads. ``nycflights_taskflow_correct`` re-produces a corrected day with these tasks.
Variables and connections as for the main example."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Variable, task

from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.operators import EpochGroup, ResealOperator, SparkCorrectionOperator
from airflow_epochs.sensors import BarrierSensor

ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")
JOBS = Path(__file__).resolve().parent / "nycflights" / "jobs"
DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
VAR = "{{{{ var.value.get('nycflights_{}', {!r}) }}}}".format  # a deployment's setting, and its default
SPARK = {"storage": VAR("storage", str(DATA / "lake")), "conn_id": VAR("spark_conn", ""),
         "spark_connect_conn_id": VAR("spark_connect", "")}


def raw(feed: str, day: str) -> str:
    """Where a feed's day lands (the deployment's Variable ``nycflights_raw``)."""
    return f"{Variable.get('nycflights_raw', default=str(DATA / 'raw'))}/{feed}/day={day}"


# [START nycflights_taskflow]
with DAG(dag_id="nycflights_taskflow", schedule="@daily", start_date=ORIGIN, end_date=ORIGIN.add(days=364),
         catchup=False, max_active_runs=3, tags=["airflow-epochs", "example", "spark"]), \
        EpochGroup("epoch", pipeline="nycflights_taskflow",
                   open_kwargs={"calendar": EpochCalendar(ORIGIN, timedelta(days=1)), "deferrable": True}) as epoch:

    @task.spark_epoch(partition="flights", application=str(JOBS / "flights.py"), **SPARK)
    def clean_flights(ds=None) -> dict:
        return {"raw": raw("flights", ds)}

    @task.spark_epoch(partition="weather", application=str(JOBS / "weather.py"), **SPARK)
    def hourly_weather(ds=None) -> dict:
        return {"raw": raw("weather", ds)}

    @task.spark_epoch(partition="daily", application=str(JOBS / "daily.py"),
                      sealed_inputs={"flights": "flights", "weather": "weather"}, **SPARK)
    def join() -> None:
        """The day's figures and running totals, from the sealed flights and weather (no inputs of its own)."""

    epoch.barrier("ingested", [clean_flights(), hourly_weather()], sensor=BarrierSensor, task_id="barrier") >> join()
# [END nycflights_taskflow]

with DAG(dag_id="nycflights_taskflow_correct", schedule=None, start_date=ORIGIN, catchup=False,
         params={"epoch": 1, "feed": "weather", "reason": "corrected feed"}, tags=["airflow-epochs", "example"]):
    ResealOperator(task_id="reseal", pipeline=epoch.pipeline, epoch="{{ params.epoch }}", partition="{{ params.feed }}",
                   reason="{{ params.reason }}") >> SparkCorrectionOperator(task_id="reproduce", group=epoch)
