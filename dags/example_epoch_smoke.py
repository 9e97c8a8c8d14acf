"""The smallest real epoch pipeline: open an epoch, two producers vote their partitions, close it.

Run it with ``airflow dags test example_epoch_smoke -c '{"epoch": 1}'`` against a ZooKeeper
connection named ``zookeeper_default`` (the README's main command sets all of that up).
"""

from __future__ import annotations

# [START example_epoch_smoke]
import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import CloseEpochOperator, OpenEpochOperator, VotePartitionOperator

PIPELINE = "smoke"
CONFIG = {"partitions": {"flights": ["ingest_flights"], "weather": ["ingest_weather"]}}

with DAG(
    dag_id="example_epoch_smoke",
    schedule=None,
    start_date=pendulum.datetime(2013, 1, 1, tz="UTC"),
    catchup=False,
    params={"epoch": 1},
    tags=["airflow-epochs", "example"],
) as dag:
    open_epoch = OpenEpochOperator(
        task_id="open_epoch", pipeline=PIPELINE, epoch="{{ params.epoch }}", config=CONFIG
    )
    votes = [
        VotePartitionOperator(
            task_id=f"vote_{partition}",
            attempt_task_id="open_epoch",
            partition=partition,
            producer=producers[0],
            manifest={"rows": "{{ params.epoch * 100 }}", "run_id": "{{ run_id }}"},
        )
        for partition, producers in CONFIG["partitions"].items()
    ]
    close_epoch = CloseEpochOperator(task_id="close_epoch", attempt_task_id="open_epoch")
    open_epoch >> votes >> close_epoch
# [END example_epoch_smoke]
