"""DAGs of benchmark 2 (seal -> downstream task running, under a real scheduler and triggerer).

``lat_upstream`` seals partition ``daily`` of pipeline ``lat`` at the epoch of its run conf; three
consumers then start their ``mark`` task: ``lat_sensor`` (our deferrable sensor), ``lat_asset``
(scheduled by Airflow on the partitioned asset) and ``lat_external`` (ExternalTaskSensor on
``lat_upstream.close``, in its defaults unless ``LAT_EXTERNAL_POKE`` says otherwise, for smoke runs).
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.sensors.external_task import ExternalTaskSensor
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.operators import CloseEpochOperator, OpenEpochOperator, VotePartitionOperator, partition_asset
from airflow_epochs.sensors import SealedPartitionSensor

START = pendulum.datetime(2024, 1, 1, tz="UTC")


@task
def mark() -> None:
    """The downstream work; its start time is the measure."""


with DAG(dag_id="lat_upstream", schedule=None, start_date=START, catchup=False, params={"epoch": 1}):
    opened = OpenEpochOperator(task_id="open", pipeline="lat", epoch="{{ params.epoch }}",
                               config={"partitions": {"daily": ["job"]}}, deferrable=True)
    vote = VotePartitionOperator(task_id="vote", attempt_task_id="open", partition="daily", producer="job")
    opened >> vote >> CloseEpochOperator(task_id="close", attempt_task_id="open", pipeline="lat", partitions=["daily"])

with DAG(dag_id="lat_sensor", schedule=None, start_date=START, catchup=False, params={"epoch": 1}):
    SealedPartitionSensor(task_id="sealed", pipeline="lat", partitions=["daily"], epoch="{{ params.epoch }}",
                          deferrable=True, timeout=900) >> mark()

with DAG(dag_id="lat_asset", schedule=PartitionedAssetTimetable(assets=partition_asset("lat", "daily")),
         start_date=START, catchup=False):
    mark()

external = {"poke_interval": float(os.environ["LAT_EXTERNAL_POKE"])} if os.environ.get("LAT_EXTERNAL_POKE") else {}
with DAG(dag_id="lat_external", schedule=None, start_date=START, catchup=False):
    ExternalTaskSensor(task_id="upstream_closed", external_dag_id="lat_upstream", external_task_id="close",
                       timeout=900, **external) >> mark()
