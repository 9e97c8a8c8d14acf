"""Test DAG of a connected lineage graph: ``totals`` is sealed and published into an Iceberg table by
its producer (SparkEpochOperator(table=...)), ``report`` reads the sealed ``totals`` (``sealed_inputs``),
and a PublishSealedOperator publishes ``totals`` too (finding it done): the three tasks name the
``totals`` partition as one dataset."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, PublishSealedOperator, SparkEpochOperator

PARAMS = {"epoch": 1, "job": "", "reader": "", "storage": "", "inputs": ""}
SPARK = {"conn_id": "spark_local", "submit_options": {"conf": {"spark.ui.enabled": "false"}, "driver_memory": "512m"}}

with DAG(dag_id="lineage_connected", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, params=PARAMS, tags=["airflow-epochs", "test"]) as dag, \
        EpochGroup("epoch", pipeline="lineage_connected",
                   config={"partitions": {"totals": ["job"], "report": ["reader"]}},
                   open_kwargs={"epoch": "{{ params.epoch }}"}) as epoch:
    totals = SparkEpochOperator(
        task_id="totals", application="{{ params.job }}", partition="totals", producer="job",
        storage="{{ params.storage }}", inputs={"events": "{{ params.inputs }}/events-{epoch}"},
        table="epochs.totals", table_conn_id="iceberg_test", **SPARK,
    )
    report = SparkEpochOperator(
        task_id="report", application="{{ params.reader }}", partition="report", producer="reader",
        storage="{{ params.storage }}", sealed_inputs={"totals": "totals"}, **SPARK,
    )
    publish = PublishSealedOperator(task_id="publish", partition="totals", table="epochs.totals",
                                    table_conn_id="iceberg_test", storage="{{ params.storage }}")
    epoch.open >> totals >> [report, publish] >> epoch.close
