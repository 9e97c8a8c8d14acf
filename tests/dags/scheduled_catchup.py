"""Catch-up under the real scheduler: six daily intervals, up to three runs at once, random delays.

The epoch comes from a cron calendar built on the DAG's own cron expression, so each interval is one
epoch; epochs must still open and seal strictly in order, whatever order the runs go in.
"""

from __future__ import annotations

import random
import time

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.coordination import CronEpochCalendar
from airflow_epochs.operators import EpochGroup, VotePartitionOperator

CRON = "0 6 * * *"
START = pendulum.datetime(2024, 1, 1, 6, tz="UTC")
CONFIG = {"partitions": {"a": ["a"], "b": ["b"]}}

dag = DAG(dag_id="catchup_epochs", schedule=CRON, start_date=START, end_date=START.add(days=5), catchup=True,
          max_active_runs=3, tags=["airflow-epochs", "test"])
with dag, EpochGroup("epoch", pipeline="catchup", config=CONFIG,
                     open_kwargs={"calendar": CronEpochCalendar(START, CRON), "deferrable": True}) as group:
    for partition in CONFIG["partitions"]:

        @task(task_id=f"work_{partition}")
        def work() -> float:
            pause = random.uniform(0.0, 2.0)
            time.sleep(pause)
            return pause

        group.open >> work() >> VotePartitionOperator(task_id=f"vote_{partition}", partition=partition,
                                                      producer=partition) >> group.close
