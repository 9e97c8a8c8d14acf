"""Three plain producer DAGs of one daily sales partition: ordinary PythonOperator tasks whose outlets
carry the day as partition key. Nothing of the provider is in this file: they are declared as the
producers of partition ``sales`` of pipeline ``sales_daily`` in example_declared_consumer.py, and the
provider's listener turns their outlet events into votes."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset

EU = Asset(name="example_sales_eu", uri="file:///data/example/sales/eu")
US = Asset(name="example_sales_us", uri="file:///data/example/sales/us")
RETURNS = Asset(name="example_returns", uri="file:///data/example/returns")


# [START declared_plain_producers]
def load_day(asset: Asset):
    def load(outlet_events, dag_run) -> str:
        day = (dag_run.conf or {}).get("day") or dag_run.logical_date.strftime("%Y-%m-%d")
        # ... load the day's rows somewhere ...
        outlet_events[asset].add_partitions(day)
        return day

    return load


for dag_id, asset in (("example_sales_eu", EU), ("example_sales_us", US), ("example_returns", RETURNS)):
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
             tags=["airflow-epochs", "example", "declared-producers"]):
        PythonOperator(task_id="load", python_callable=load_day(asset), outlets=[asset])
# [END declared_plain_producers]
