"""Upstream and downstream DAGs for the scheduler-driven gating test (real scheduler and triggerer).

``gating_upstream`` seals partition ``daily`` of pipeline ``gating`` for the epoch in its run conf
and emits the partition's asset event; ``gating_downstream`` is scheduled by Airflow on that
partitioned asset and, as a second gate, waits (deferred, in the triggerer) for the seal itself.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.operators import CloseEpochOperator, OpenEpochOperator, VotePartitionOperator, partition_asset
from airflow_epochs.sensors import SealedPartitionSensor

START = pendulum.datetime(2024, 1, 1, tz="UTC")

with DAG(dag_id="gating_upstream", schedule=None, start_date=START, catchup=False, params={"epoch": 1},
         tags=["airflow-epochs", "test"]):
    opened = OpenEpochOperator(task_id="open", pipeline="gating", epoch="{{ params.epoch }}",
                               config={"partitions": {"daily": ["job"]}}, deferrable=True)
    vote = VotePartitionOperator(task_id="vote", attempt_task_id="open", partition="daily", producer="job",
                                 manifest={"rows": "{{ params.epoch }}"})
    close = CloseEpochOperator(task_id="close", attempt_task_id="open", pipeline="gating", partitions=["daily"])
    opened >> vote >> close

with DAG(dag_id="gating_downstream", schedule=PartitionedAssetTimetable(assets=partition_asset("gating", "daily")),
         start_date=START, catchup=False, tags=["airflow-epochs", "test"]):
    sealed = SealedPartitionSensor(task_id="sealed", pipeline="gating", partitions=["daily"],
                                   epoch="{{ dag_run.partition_key }}", deferrable=True, timeout=300)

    @task
    def consume(seals: dict, dag_run=None) -> dict:
        return {"partition_key": dag_run.partition_key, "attempt": seals["daily"]["attempt"]}

    consume(sealed.output)
