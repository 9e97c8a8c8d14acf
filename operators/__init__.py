"""Operators that make epochs ordinary DAG stages (installed as ``airflow_epochs.operators``)."""

from airflow_epochs.operators.epoch import (
    ArriveAtBarrierOperator,
    CloseEpochOperator,
    OpenEpochOperator,
    ReconfigureOperator,
    RollbackOperator,
    VotePartitionOperator,
    partition_asset,
)
from airflow_epochs.operators.group import EpochGroup

__all__ = [
    "ArriveAtBarrierOperator",
    "CloseEpochOperator",
    "EpochGroup",
    "OpenEpochOperator",
    "ReconfigureOperator",
    "RollbackOperator",
    "VotePartitionOperator",
    "partition_asset",
]
