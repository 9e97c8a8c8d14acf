"""A TaskFlow pipeline under the real scheduler (``tests/system/test_taskflow_scheduler.py``): two producers
of ``orders`` (``@task.epoch_producer``) arrive at barrier ``loaded``; ``daily`` waits for it and seals the
day; a downstream DAG scheduled on the sealed ``daily`` partition (one run per epoch, its partition key)
is gated by a deferred sensor on the seal. The stages are inside the tasks (``inline_stages``): three
tasks an epoch, no configuration beside them."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.coordination import CronEpochCalendar
from airflow_epochs.operators import EpochGroup, partition_asset
from airflow_epochs.sensors import SealedPartitionSensor

CRON = "0 6 * * *"
START = pendulum.datetime(2024, 1, 1, 6, tz="UTC")

with DAG(dag_id="taskflow_daily", schedule=CRON, start_date=START, end_date=START.add(days=2), catchup=True,
         max_active_runs=3, tags=["airflow-epochs", "test"]), \
        EpochGroup("epoch", pipeline="taskflow", inline_stages=True,
                   open_kwargs={"calendar": CronEpochCalendar(START, CRON), "deferrable": True}) as epoch:

    @task.epoch_producer(partition="orders")
    def orders_eu(data_interval_start=None) -> dict:
        return {"rows": 10 * data_interval_start.day}

    @task.epoch_producer(partition="orders")
    def orders_us(data_interval_start=None) -> dict:
        return {"rows": data_interval_start.day}

    @task.epoch_producer(partition="daily")
    def daily(eu: dict, us: dict) -> dict:
        return {"rows": eu["rows"] + us["rows"]}

    eu, us = orders_eu(), orders_us()
    epoch.barrier("loaded", [eu, us]) >> daily(eu, us)

with DAG(dag_id="taskflow_report", schedule=PartitionedAssetTimetable(assets=partition_asset("taskflow", "daily")),
         catchup=False, tags=["airflow-epochs", "test"]):
    sealed = SealedPartitionSensor(task_id="sealed", pipeline="taskflow", partitions=["daily"],
                                   epoch="{{ dag_run.partition_key }}", deferrable=True, timeout=600)

    @task
    def report(seals: dict) -> int:
        return int(seals["daily"]["version"])

    report(sealed.output)
