"""Downstream of example_epoch_pipeline, gated two ways:

- ``downstream_on_sealed_asset`` is scheduled by Airflow itself on the sealed ``daily`` partition's
  asset (a partitioned asset: one run per sealed epoch, its partition key is the epoch);
- ``downstream_with_sensor`` runs on the same daily schedule and waits, deferred, for the seal.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.analysis import blazes_label
from airflow_epochs.operators import partition_asset
from airflow_epochs.sensors import SealedPartitionSensor

DAILY = partition_asset("flights_daily", "daily")
ORIGIN = pendulum.datetime(2013, 1, 1, tz="UTC")

with DAG(
    dag_id="downstream_on_sealed_asset",
    schedule=PartitionedAssetTimetable(assets=DAILY),
    catchup=False,
    tags=["airflow-epochs", "example"],
):

    @task
    def report(dag_run=None) -> str:
        """Build the day's report from sealed data only (the epoch is the run's partition key)."""
        return f"report for epoch {dag_run.partition_key if dag_run else '?'}"

    blazes_label(report(), "OR", gate=("epoch",))  # a report of one epoch (for `airflow-epochs analyze`)


with DAG(
    dag_id="downstream_with_sensor",
    schedule="@daily",
    start_date=ORIGIN,
    catchup=False,
    tags=["airflow-epochs", "example"],
):
    wait = SealedPartitionSensor(
        task_id="wait_for_daily",
        pipeline="flights_daily",
        partitions=["daily"],
        epoch="{{ (data_interval_start - macros.datetime(2013, 1, 1, tzinfo=data_interval_start.tzinfo)).days + 1 }}",
        deferrable=True,
        timeout=6 * 3600,
    )

    @task
    def report_after_seal(seals: dict) -> str:
        return f"sealed by attempt {seals['daily']['attempt']}"

    blazes_label(report_after_seal(wait.output), "OR", gate=("epoch",))
