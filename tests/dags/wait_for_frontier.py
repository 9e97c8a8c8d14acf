"""Test DAG: a downstream consumer that waits for a pipeline's frontier, deferred and poking."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.sensors import FrontierSensor, SealedPartitionSensor

with DAG(
    dag_id="test_wait_for_frontier",
    schedule=None,
    start_date=pendulum.datetime(2013, 1, 1, tz="UTC"),
    catchup=False,
    params={"pipeline": "smoke", "epoch": 1},
) as dag:
    FrontierSensor(
        task_id="wait_deferred",
        pipeline="{{ params.pipeline }}",
        epoch="{{ params.epoch }}",
        deferrable=True,
        timeout=60,
    )
    FrontierSensor(
        task_id="wait_poking",
        pipeline="{{ params.pipeline }}",
        epoch="{{ params.epoch }}",
        deferrable=False,
        poke_interval=0.2,
        timeout=60,
        mode="poke",
    )
    SealedPartitionSensor(
        task_id="wait_partition_deferred",
        pipeline="{{ params.pipeline }}",
        partitions=["flights"],
        epoch="{{ params.epoch }}",
        deferrable=True,
        timeout=60,
    )
