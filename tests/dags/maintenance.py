"""Maintenance as DAG runs: schedule a reconfiguration, roll back epochs and re-seal a past epoch of pipeline ``maint``,
next to the producer DAG that runs its epochs."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_epochs.operators import (
    EpochGroup,
    ReconfigureOperator,
    ResealOperator,
    RollbackOperator,
    VotePartitionOperator,
)
from airflow_epochs.sensors import NewestVersionSensor, SealedPartitionSensor

START = pendulum.datetime(2024, 1, 1, tz="UTC")
CONFIG = {"partitions": {"out": ["job"]}}

producer = DAG(dag_id="maint_producer", schedule=None, start_date=START, catchup=False, params={"epoch": 1},
               tags=["airflow-epochs", "test"])
with producer, EpochGroup("epoch", pipeline="maint", config=CONFIG,
                          open_kwargs={"epoch": "{{ params.epoch }}"}) as group:
    group.open >> VotePartitionOperator(task_id="job", partition="out", producer="job") >> group.close

# [START reconfigure]
with DAG(dag_id="maint_reconfigure", schedule=None, start_date=START, catchup=False, params={"from_epoch": 3},
         tags=["airflow-epochs", "test"]):
    ReconfigureOperator(task_id="reconfigure", pipeline="maint", from_epoch="{{ params.from_epoch }}",
                        config={"partitions": {"out": ["job"]}, "window": 5})
# [END reconfigure]

# [START rollback]
with DAG(dag_id="maint_rollback", schedule=None, start_date=START, catchup=False,
         params={"to_epoch": 1, "reason": "reprocess"}, tags=["airflow-epochs", "test"]):
    RollbackOperator(task_id="rollback", pipeline="maint", to_epoch="{{ params.to_epoch }}",
                     reason="{{ params.reason }}")
# [END rollback]

# [START reseal]
with DAG(dag_id="maint_reseal", schedule=None, start_date=START, catchup=False,
         params={"epoch": 1, "partition": "out", "reason": "late input"}, tags=["airflow-epochs", "test"]):
    ResealOperator(task_id="reseal", pipeline="maint", epoch="{{ params.epoch }}", partition="{{ params.partition }}",
                   reason="{{ params.reason }}")
# [END reseal]

with DAG(dag_id="maint_sealed", schedule=None, start_date=START, catchup=False, params={"epoch": 1},
         tags=["airflow-epochs", "test"]):
    SealedPartitionSensor(task_id="sealed", pipeline="maint", partitions="out", epoch="{{ params.epoch }}",
                          timeout=60)

# [START newest]
with DAG(dag_id="maint_newest", schedule=None, start_date=START, catchup=False,
         params={"epoch": 1, "min_version": 1}, tags=["airflow-epochs", "test"]):
    NewestVersionSensor(task_id="newest", pipeline="maint", partition="out", epoch="{{ params.epoch }}",
                        min_version="{{ params.min_version }}", deferrable=True, timeout=60)
# [END newest]
