"""Three plain producer DAGs (PythonOperator with partitioned outlets; nothing of the provider in them),
an undeclared DAG writing the same kind of event, and the consumer of the declared partition ``sales``
of pipeline ``declared``: ``prod_eu.load`` and ``prod_us.load`` are declared as tasks, the asset
``file:///data/returns`` (updated by ``prod_returns``) as an asset producer."""

from __future__ import annotations

import os
import signal

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset

EU = Asset(name="sales_eu", uri="file:///data/sales/eu")
US = Asset(name="sales_us", uri="file:///data/sales/us")
RETURNS = Asset(name="returns", uri="file:///data/returns")
OTHER = Asset(name="sales_other", uri="file:///data/sales/other")
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def produce(asset: Asset):
    def load(outlet_events, dag_run, ti) -> str:
        key = dag_run.conf["key"]
        # the scheduler test's "killed -9 and retried": the first try dies before it reports success
        if dag_run.conf.get("die_on_first_try") and ti.try_number == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        outlet_events[asset].add_partitions(key)
        return key

    return load


for dag_id, asset in (("prod_eu", EU), ("prod_us", US), ("prod_returns", RETURNS), ("prod_other", OTHER)):
    with DAG(dag_id=dag_id, schedule=None, start_date=START, catchup=False, tags=["test"],
             default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=2)}):
        PythonOperator(task_id="load", python_callable=produce(asset), outlets=[asset])
