"""An epoch-batched pipeline with the full shape of a stage:

    open >> [ingest_flights, ingest_weather] >> barrier >> join >> close

Each producer arrives at the barrier "ingested" when its part is in; the barrier task (a deferrable
sensor) waits for the release, decided by ZooKeeper, whoever the participants are (other DAGs, Spark
jobs, another deployment). The tasks define the pipeline: its partitions, producers and barrier are
collected from them by the EpochGroup, which also runs its open task first and its close task last.

One epoch per day of 2013 (the calendar maps each run's data interval to its epoch); catch-up runs
may overlap (max_active_runs=3), yet epochs open and seal strictly in order, because epoch e's open
task waits, deferred, until e-1 is sealed. The producers here stand in for Spark jobs (the next step
of the project submits real ones); each votes its partition with a manifest. The close task emits one
asset event per sealed partition, with the epoch as partition key, for downstream DAGs.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.coordination.base.calendar import EpochCalendar
from airflow_epochs.operators import EpochGroup, VotePartitionOperator
from airflow_epochs.sensors import BarrierSensor

PIPELINE = "flights_daily"
ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")
CALENDAR = EpochCalendar(ORIGIN, timedelta(days=1))

# [START example_epoch_pipeline]
with DAG(
    dag_id="example_epoch_pipeline",
    schedule="@daily",
    start_date=ORIGIN,
    end_date=pendulum.datetime(2013, 12, 31, tz="UTC"),
    catchup=True,
    max_active_runs=3,
    params={"max_delay": 0.5},
    tags=["airflow-epochs", "example"],
) as dag, EpochGroup("epoch", pipeline=PIPELINE, close_partitions=["daily"],
                open_kwargs={"calendar": CALENDAR, "lease_seconds": 30, "deferrable": True}) as epoch:

    @task
    def jitter(params=None) -> float:
        """Random delay: overlapping runs must still seal in order."""
        delay = random.uniform(0, float((params or {}).get("max_delay", 0)))  # noqa: S311 - test jitter
        time.sleep(delay)
        return delay

    votes = []
    for partition, producer in (("flights", "ingest_flights"), ("weather", "ingest_weather")):
        vote = VotePartitionOperator(
            task_id=producer, partition=partition, producer=producer,
            manifest={"rows": "{{ ti.xcom_pull(task_ids='epoch.open')['epoch'] * 10 }}", "run_id": "{{ run_id }}"},
        )
        jitter.override(task_id=f"{producer}_work")() >> vote
        votes.append(vote)
    # Each producer arrives once it voted (an arrival task each); the barrier task waits for the release.
    join = VotePartitionOperator(task_id="join", partition="daily", producer="join",
                                 manifest={"inputs": ["flights", "weather"]})
    barrier = epoch.barrier("ingested", votes, straggler_timeout=600, sensor=BarrierSensor, task_id="barrier",
                            timeout=900)
    barrier >> join
# [END example_epoch_pipeline]
