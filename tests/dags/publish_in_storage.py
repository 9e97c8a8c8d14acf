"""Test DAG of PublishSealedOperator's storage root: a producer votes a manifest whose run folder the
test chose (inside the storage root or not), then the publish task, given the storage root, publishes
the seal or refuses it."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, PublishSealedOperator, VotePartitionOperator

PARAMS = {"epoch": 1, "location": "", "storage": "", "table": "epochs.in_storage"}

with DAG(dag_id="test_publish_in_storage", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, params=PARAMS, tags=["airflow-epochs", "test"]) as dag, \
        EpochGroup("epoch", pipeline="in_storage", config={"partitions": {"daily": ["job"]}},
                   open_kwargs={"epoch": "{{ params.epoch }}"}) as epoch:
    vote = VotePartitionOperator(
        task_id="vote", partition="daily", producer="job",
        # the run the test's folder names: epoch 1, the epoch's first attempt, run r1
        manifest={"epoch": 1, "attempt": 1, "run": "r1", "location": "{{ params.location }}",
                  "outputs": {"data": {"path": "{{ params.location }}/data", "format": "parquet", "rows": 2,
                                       "checksum": "c", "files": 1}}},
    )
    publish = PublishSealedOperator(task_id="publish", partition="daily", table="{{ params.table }}",
                                    table_conn_id="iceberg_test", storage="{{ params.storage }}")
    epoch.open >> vote >> publish >> epoch.close
