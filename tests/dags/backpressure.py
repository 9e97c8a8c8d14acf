"""Backpressure as DAG stages: producers of pipeline ``bp`` (window 1) and the consumer that
acknowledges epochs. Four producer variants: deferred or blocking wait, without limit or giving up
after 2 seconds."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import AcknowledgeEpochOperator, EpochGroup, VotePartitionOperator

START = pendulum.datetime(2024, 1, 1, tz="UTC")
# [START backpressure_config]
CONFIG = {"partitions": {"out": ["job"]}, "window": 1}
# [END backpressure_config]

VARIANTS = {
    "bp_producer": {"deferrable": True},
    "bp_producer_blocking": {"deferrable": False},
    "bp_producer_impatient": {"backpressure_wait": 2, "deferrable": True},
    "bp_producer_impatient_blocking": {"backpressure_wait": 2, "deferrable": False},
}

for dag_id, open_kwargs in VARIANTS.items():
    producer = DAG(dag_id=dag_id, schedule=None, start_date=START, catchup=False, params={"epoch": 1},
                   tags=["airflow-epochs", "test"])
    with producer, EpochGroup("epoch", pipeline="bp", config=CONFIG,
                              open_kwargs={"epoch": "{{ params.epoch }}", **open_kwargs}) as group:
        job = VotePartitionOperator(task_id="job", partition="out", producer="job")
        group.open >> job >> group.close

# [START backpressure_consumer]
with DAG(dag_id="bp_consumer", schedule=None, start_date=START, catchup=False, params={"epoch": 1},
         tags=["airflow-epochs", "test"]):
    AcknowledgeEpochOperator(task_id="ack", pipeline="bp", consumer="report", epoch="{{ params.epoch }}")
# [END backpressure_consumer]
