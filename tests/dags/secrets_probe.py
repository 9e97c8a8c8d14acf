"""Test DAG for the log-secrets test: one epoch whose two producers run the running-totals job through
spark-submit and on Spark Connect, with a credentialed URI among their inputs, on a ZooKeeper
connection with digest credentials."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, SparkEpochOperator

CONFIG = {"partitions": {"submitted": ["submit"], "connected": ["connect"]}}
PARAMS = {"epoch": 1, "job": "", "storage": "", "inputs": "", "faults": ""}
# The credentialed location comes from the deployment (a Variable), as storage would: not a run param.
INPUTS = {"events": "{{ params.inputs }}/events-{epoch}", "faults": "{{ params.faults }}",
          "archive": "{{ var.value.secrets_probe_archive }}"}

with DAG(dag_id="secrets_probe", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         params=PARAMS, tags=["airflow-epochs", "test"]) as dag, \
        EpochGroup("epoch", pipeline="secrets_probe", config=CONFIG, open_kwargs={"epoch": "{{ params.epoch }}"}) \
        as epoch:
    submit = SparkEpochOperator(task_id="submit", application="{{ params.job }}", partition="submitted",
                                producer="submit", storage="{{ params.storage }}", inputs=INPUTS,
                                conn_id="spark_probe_local",
                                submit_options={"conf": {"spark.ui.enabled": "false"}, "driver_memory": "512m"})
    connect = SparkEpochOperator(task_id="connect", application="{{ params.job }}", partition="connected",
                                 producer="connect", storage="{{ params.storage }}", inputs=INPUTS,
                                 spark_connect_conn_id="spark_connect_test")
    epoch.open >> [submit, connect] >> epoch.close
