"""The consumer of declared partition ``sales`` of pipeline ``declared`` (producers in
declared_producers.py): one run per complete key, started by the seal's asset event."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from airflow_epochs.operators.declared import ReceiveDeclaredKeyOperator, declared_gate_asset

SALES = declared_gate_asset("declared", "sales", consumer="sales_report", scope="test")

with DAG(dag_id="sales_report", schedule=[SALES], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, tags=["test"]):
    receive = ReceiveDeclaredKeyOperator(task_id="receive", pipeline="declared", partition="sales",
                                         consumer="sales_report")

    def report(ti) -> str:
        return ti.xcom_pull(task_ids="receive")["partition_key"]

    receive >> PythonOperator(task_id="report", python_callable=report)
