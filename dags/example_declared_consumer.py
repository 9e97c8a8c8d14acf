"""The consumer of the plain producers in example_declared_producers.py: one run per complete day.

``SALES_DAILY`` declares the producers (two tasks, and an asset with the DAG allowed to update it) and
maps days to epochs; ``example_declared_setup`` stores it as the pipeline's configuration (run it once).
Each deployment names the pipeline in ``[epochs] declared_pipelines`` (``AIRFLOW__EPOCHS__DECLARED_PIPELINES=
sales_daily``), so the provider's listener votes for the producers. ``example_sales_report`` runs once
per day whose three producers all succeeded, in day order.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.analysis import blazes_label
from airflow_epochs.coordination import EpochCalendar
from airflow_epochs.coordination.wire.declared import AssetProducer, CalendarKeys, DeclaredProducers, TaskProducer
from airflow_epochs.operators.declared import ReceiveDeclaredKeyOperator, declared_gate_asset

START = pendulum.datetime(2026, 1, 1, tz="UTC")
SALES_DAILY = DeclaredProducers(
    {"sales": (TaskProducer("example_sales_eu", "load", name="eu"),
               TaskProducer("example_sales_us", "load", name="us"),
               AssetProducer("returns", "file:///data/example/returns", dag_ids=("example_returns",)))},
    CalendarKeys(EpochCalendar(START, timedelta(days=1))),  # 2026-01-01 is epoch 1, the next day 2, ...
)

with DAG(dag_id="example_declared_setup", schedule=None, start_date=START, catchup=False,
         tags=["airflow-epochs", "example", "declared-producers"]):

    @task
    def declare() -> int:
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        with ZooKeeperHook() as hook:
            version = hook.ledger("sales_daily", owner="setup").create_pipeline(SALES_DAILY.pipeline_config())
        return version.version

    blazes_label(declare(), "CW")  # creating the pipeline is idempotent: a repeat changes nothing

with DAG(dag_id="example_sales_report", schedule=[declared_gate_asset("sales_daily", "sales", consumer="report")],
         start_date=START, catchup=False, tags=["airflow-epochs", "example", "declared-producers"]):
    day = ReceiveDeclaredKeyOperator(task_id="receive", pipeline="sales_daily", partition="sales", consumer="report")
    blazes_label(day, "CR", seals=("epoch",))  # the key it returns is sealed: every producer voted

    @task
    def report(received: dict) -> str:
        return f"sales report for {received['partition_key']}"

    blazes_label(report(day.output), "CR")
