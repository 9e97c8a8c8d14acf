"""A pipeline whose DAG changes (``tests/system/test_redefined_pipeline.py``): ``redefined_v1`` has one producer
of ``orders``; ``redefined_v2`` adds a second one from epoch 3 (``EpochGroup(from_epoch=3)``), with no rewrite
of the epochs before it."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import EpochGroup, VotePartitionOperator

for version, producers, from_epoch in (("v1", ("orders_eu",), None), ("v2", ("orders_eu", "orders_us"), 3)):
    with DAG(dag_id=f"redefined_{version}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             catchup=False, params={"epoch": 1}, tags=["airflow-epochs", "test"]), \
            EpochGroup("epoch", pipeline="redefined", from_epoch=from_epoch,
                       open_kwargs={"epoch": "{{ params.epoch }}"}):
        for producer in producers:
            VotePartitionOperator(task_id=producer, partition="orders", producer=producer, manifest={"by": producer})
