"""Test DAG of publishing and lineage: the running-totals job on Spark, published into an Iceberg table
right after its seal (SparkEpochOperator(table=...)), a PublishSealedOperator that repeats the publish
(finding it done), then the close."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, PublishSealedOperator, SparkEpochOperator

PARAMS = {"epoch": 1, "job": "", "storage": "", "inputs": ""}

with DAG(dag_id="published_totals", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, params=PARAMS, tags=["airflow-epochs", "test"]) as dag, \
        EpochGroup("epoch", pipeline="published_totals", config={"partitions": {"totals": ["job"]}},
                   open_kwargs={"epoch": "{{ params.epoch }}"}) as epoch:
    run = SparkEpochOperator(
        task_id="totals", application="{{ params.job }}", partition="totals", producer="job",
        storage="{{ params.storage }}", inputs={"events": "{{ params.inputs }}/events-{epoch}"},
        conn_id="spark_local", submit_options={"conf": {"spark.ui.enabled": "false"}, "driver_memory": "512m"},
        table="epochs.totals", table_conn_id="iceberg_test",
    )
    publish = PublishSealedOperator(task_id="publish", partition="totals", table="epochs.totals",
                                    table_conn_id="iceberg_test")
    epoch.open >> run >> publish >> epoch.close
