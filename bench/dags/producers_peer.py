"""The peer of the declared-producers benchmark: the same three producer assets
(tests/dags/declared_producers.py), consumed by Airflow's own partitioned-asset scheduling, with no
provider code: one run per partition key once all three assets have an event for it."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset, PartitionedAssetTimetable

EU = Asset(name="sales_eu", uri="file:///data/sales/eu")
US = Asset(name="sales_us", uri="file:///data/sales/us")
RETURNS = Asset(name="returns", uri="file:///data/returns")

with DAG(dag_id="sales_report_peer", schedule=PartitionedAssetTimetable(assets=EU & US & RETURNS),
         start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, tags=["bench"]):

    def receive(dag_run) -> str:
        return str(dag_run.partition_key)

    PythonOperator(task_id="receive", python_callable=receive)
