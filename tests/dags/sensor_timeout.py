"""A poke-mode sensor waiting for a partition that is never sealed (its timeout message is tested)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.sensors import SealedPartitionSensor

with DAG(dag_id="sensor_timeout_poke", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, tags=["airflow-epochs", "test"]):
    SealedPartitionSensor(task_id="wait", pipeline="late", partitions=["daily"], epoch=4, deferrable=False,
                          mode="poke", poke_interval=0.5, timeout=2)
