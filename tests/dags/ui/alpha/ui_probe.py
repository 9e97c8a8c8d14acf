"""The DAG that drives pipeline ``uiprobe`` in the Epochs page's browser test (bundle of team alpha).
Its state is written by the test through the coordination API; the DAG is never run there."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, VotePartitionOperator

CONFIG = {"partitions": {"left": ["a", "b"], "right": ["c"]}, "barriers": {"ingested": ["a", "c"]}}

with DAG(dag_id="ui_probe", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         tags=["airflow-epochs", "test"]) as dag, EpochGroup("epoch", pipeline="uiprobe", config=CONFIG) as group:
    for partition, producer in (("left", "a"), ("left", "b"), ("right", "c")):
        group.open >> VotePartitionOperator(task_id=producer, partition=partition, producer=producer) >> group.close
