"""Deferrable sensors on a pipeline that does not exist, for `airflow dags test` (the newcomer's typo):
``short`` runs out of its 15 s timeout inline, then ``long`` waits until the test sends SIGTERM."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.sensors import SealedPartitionSensor

with DAG(dag_id="wait_on_a_typo", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, tags=["airflow-epochs", "test"]):
    short = SealedPartitionSensor(task_id="short", pipeline="nycflight", partitions="daily", epoch=1,
                                  deferrable=True, timeout=15, retries=0)
    long = SealedPartitionSensor(task_id="long", pipeline="nycflight", partitions="daily", epoch=1,
                                 deferrable=True, timeout=3600, retries=0, trigger_rule="all_done")
    short >> long
