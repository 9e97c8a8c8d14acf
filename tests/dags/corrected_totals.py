"""Test DAG of a correction's lineage: re-seal ``totals`` of pipeline ``corrected_totals`` at a past epoch and
re-produce it, and every seal that read it, with the running-totals job on Spark Connect
(SparkCorrectionOperator); the epochs themselves are run by the test."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import ResealOperator, SparkCorrectionOperator

PARAMS = {"epoch": 2, "job": "", "storage": "", "inputs": "", "reason": "late rows"}

with DAG(dag_id="corrected_totals_fix", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, params=PARAMS, tags=["airflow-epochs", "test"]):
    reseal = ResealOperator(task_id="reseal", pipeline="corrected_totals", epoch="{{ params.epoch }}",
                            partition="totals", reason="{{ params.reason }}")
    reproduce = SparkCorrectionOperator(
        task_id="reproduce", pipeline="corrected_totals", storage="{{ params.storage }}",
        jobs={"job": {"partition": "totals", "application": "{{ params.job }}",
                      "inputs": {"events": "{{ params.inputs }}/events-{epoch}"}}},
        spark_connect_conn_id="spark_connect_test")
    reseal >> reproduce
