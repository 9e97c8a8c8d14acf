"""A first pipeline of your own (docs/guides/first_pipeline.rst includes it between its markers): two
producers seal one partition together, a second partition has its own producer, and a downstream DAG
starts only once both partitions of its epoch are sealed. Run by the tests with dag.test()."""

from __future__ import annotations

# [START first_pipeline]
import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.analysis import blazes_label
from airflow_epochs.operators import EpochGroup, VotePartitionOperator
from airflow_epochs.sensors import SealedPartitionSensor

PIPELINE = "shop"

with DAG(dag_id="shop_daily", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, params={"epoch": 1}, tags=["airflow-epochs", "example"]), \
        EpochGroup("epoch", pipeline=PIPELINE, open_kwargs={"epoch": "{{ params.epoch }}"}):

    @task
    def load(region: str, params=None) -> int:
        """Your real work goes here (a Spark job, a copy); it returns the rows it wrote."""
        return 10 * int(params["epoch"]) + len(region)

    # The votes define the pipeline: a partition is sealed once every producer that votes it has voted.
    for producer, partition in (("orders_eu", "orders"), ("orders_us", "orders"), ("refunds", "refunds")):
        VotePartitionOperator(task_id=f"vote_{producer}", partition=partition, producer=producer,
                              manifest={"rows": load.override(task_id=f"load_{producer}")(producer)})

with DAG(dag_id="shop_report", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, params={"epoch": 1}, tags=["airflow-epochs", "example"]):
    # Waits until both partitions of the epoch are sealed, and never reads a half-written one.
    both = SealedPartitionSensor(task_id="wait", pipeline=PIPELINE, partitions=["orders", "refunds"],
                                 epoch="{{ params.epoch }}", timeout=600, deferrable=True)

    @task
    def report(seals: dict) -> str:
        return f"orders v{seals['orders']['version']}, refunds v{seals['refunds']['version']}"

    # It reads sealed partitions only: order-insensitive (the coordination analysis checks the label).
    blazes_label(report(both.output), "CR")
# [END first_pipeline]
