"""The DAG that drives pipeline ``uiother`` in the Epochs page's browser test (bundle of team beta)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, VotePartitionOperator

with DAG(dag_id="ui_other", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         tags=["airflow-epochs", "test"]) as dag, EpochGroup("epoch", pipeline="uiother",
                                                             config={"partitions": {"out": ["job"]}}) as group:
    group.open >> VotePartitionOperator(task_id="job", partition="out", producer="job") >> group.close
