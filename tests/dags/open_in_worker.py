"""Test DAG: an epoch opened without deferral; the open task waits in the worker (on a watch) for the
previous epoch to be sealed, with no deadline."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import OpenEpochOperator

with DAG(
    dag_id="test_open_in_worker",
    schedule=None,
    start_date=pendulum.datetime(2013, 1, 1, tz="UTC"),
    catchup=False,
    params={"pipeline": "in-worker", "epoch": 2},
) as dag:
    OpenEpochOperator(
        task_id="open",
        pipeline="{{ params.pipeline }}",
        epoch="{{ params.epoch }}",
        config={"partitions": {"out": ["job"]}},
        deferrable=False,
        backpressure_wait=None,
        owner_id="worker-deployment",
    )
