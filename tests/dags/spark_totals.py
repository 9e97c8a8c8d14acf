"""Test DAGs for the Spark epoch operator: the running-totals job through spark-submit (any master, by
connection) and through Spark Connect, plus a DAG whose attempt is forged to be out of order."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.operators import CloseEpochOperator, EpochGroup, SparkEpochOperator

CONFIG = {"partitions": {"totals": ["job"]}}
PARAMS = {"epoch": 1, "job": "", "storage": "", "inputs": "", "faults": "", "spark_conn": "spark_default",
          "connect_conn": "spark_connect_default"}
INPUTS = {"events": "{{ params.inputs }}/events-{epoch}", "faults": "{{ params.faults }}"}

for dag_id, connect in (("spark_totals_submit", False), ("spark_totals_connect", True)):
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
             params=PARAMS, tags=["airflow-epochs", "test"]) as dag, \
            EpochGroup("epoch", pipeline=dag_id, config=CONFIG, open_kwargs={"epoch": "{{ params.epoch }}"}) as epoch:
        run = SparkEpochOperator(
            task_id="totals", application="{{ params.job }}", partition="totals", producer="job",
            storage="{{ params.storage }}",
            inputs=INPUTS, conn_id="{{ params.spark_conn }}",
            spark_connect_conn_id="{{ params.connect_conn }}" if connect else None,
            submit_options=None if connect else {"conf": {"spark.ui.enabled": "false"}, "driver_memory": "512m"},
        )
        epoch.open >> run >> epoch.close

with DAG(dag_id="spark_totals_guard", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, params=PARAMS, tags=["airflow-epochs", "test"]) as guard:

    @task
    def forged_attempt(params=None) -> dict:
        """An attempt for epoch 2 while epoch 1 is open: what a confused or replayed task would carry."""
        from airflow_epochs.coordination import EpochLedger
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        with ZooKeeperHook() as hook:
            attempt = EpochLedger(hook.get_conn(), "spark_totals_guard").current_attempt(1)
        return {**attempt.to_dict(), "epoch": 2}

    forged = forged_attempt()
    run = SparkEpochOperator(task_id="totals", application="{{ params.job }}", partition="totals", producer="job",
                             storage="{{ params.storage }}", inputs=INPUTS, attempt_task_id="forged_attempt")
    forged >> run >> CloseEpochOperator(task_id="close", attempt_task_id="forged_attempt")
