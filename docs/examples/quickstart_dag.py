"""The quickstart's first epoch DAG (docs/quickstart/own_airflow.rst includes it between its markers).

One epoch a day for three days of 2026: the scheduler starts the three runs at once (catch-up), yet
the epochs open and seal in order, because the open task of day 2 waits, deferred to the triggerer,
until day 1 is sealed. The tasks are the pipeline's definition: its one partition, ``orders``, and its
producer come from the vote. ``tests/system/test_docs_quickstart.py`` runs it under a real scheduler and
triggerer, as the page says; ``quickstart_taskflow.py`` is the same DAG in TaskFlow style.
"""

from __future__ import annotations

# [START quickstart_dag]
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.coordination import EpochCalendar
from airflow_epochs.operators import EpochGroup, VotePartitionOperator

FIRST_DAY = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    dag_id="quickstart_epochs",
    schedule="@daily",
    start_date=FIRST_DAY,
    end_date=FIRST_DAY.add(days=2),  # three runs: epochs 1, 2 and 3
    catchup=True,
    max_active_runs=3,
    tags=["airflow-epochs", "quickstart"],
) as dag, EpochGroup(
    "epoch",
    pipeline="quickstart",
    # FIRST_DAY is epoch 1; deferrable: the triggerer waits for the previous seal
    open_kwargs={"calendar": EpochCalendar(FIRST_DAY, timedelta(days=1)),
                 "deferrable": True},
):

    @task
    def load_orders(data_interval_start=None) -> int:
        """Stands in for your real work (a Spark job, a copy): the rows it wrote."""
        return 100 + data_interval_start.day

    # The group runs its open task before load_orders and its close task after the vote.
    VotePartitionOperator(
        task_id="vote_orders",
        partition="orders",
        producer="load_orders",
        manifest={"rows": load_orders()},  # what load_orders returned (an int, not a rendered string)
    )
# [END quickstart_dag]
