"""The quickstart's first epoch DAG in TaskFlow style (docs/quickstart/own_airflow.rst shows it beside
``quickstart_dag.py``): the same pipeline shape, one ``@task.epoch_producer`` whose returned manifest is its
vote. ``tests/system/test_docs_examples.py`` runs it for its three epochs.
"""

from __future__ import annotations

# [START quickstart_taskflow]
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.coordination import EpochCalendar
from airflow_epochs.operators import EpochGroup

FIRST_DAY = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    dag_id="quickstart_taskflow",
    schedule="@daily",
    start_date=FIRST_DAY,
    end_date=FIRST_DAY.add(days=2),  # three runs: epochs 1, 2 and 3
    catchup=True,
    max_active_runs=3,
    tags=["airflow-epochs", "quickstart"],
) as dag, EpochGroup(
    "epoch",
    pipeline="quickstart_taskflow",
    open_kwargs={"calendar": EpochCalendar(FIRST_DAY, timedelta(days=1)),
                 "deferrable": True},
):

    @task.epoch_producer(partition="orders")
    def load_orders(data_interval_start=None) -> dict:
        """Stands in for your real work (a Spark job, a copy); returns its manifest, what it wrote."""
        return {"rows": 100 + data_interval_start.day}

    load_orders()
# [END quickstart_taskflow]
