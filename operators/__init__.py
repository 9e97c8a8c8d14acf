"""Operators that make epochs ordinary DAG stages (installed as ``airflow_epochs.operators``)."""

from airflow_epochs.operators.changes import PipelineChangeOperator, ReconfigureOperator, RollbackOperator
from airflow_epochs.operators.consumer import AcknowledgeEpochOperator
from airflow_epochs.operators.corrections import ResealOperator
from airflow_epochs.operators.deadline import WatchDeadlineOperator
from airflow_epochs.operators.epoch import (
    ArriveAtBarrierOperator,
    CloseEpochOperator,
    OpenEpochOperator,
    VotePartitionOperator,
    partition_asset,
)
from airflow_epochs.operators.group import EpochGroup
from airflow_epochs.operators.publish import PublishSealedOperator
from airflow_epochs.operators.spark import SparkEpochOperator
from airflow_epochs.operators.spark_corrections import SparkCorrectionOperator

__all__ = [
    "AcknowledgeEpochOperator",
    "ArriveAtBarrierOperator",
    "CloseEpochOperator",
    "EpochGroup",
    "OpenEpochOperator",
    "PipelineChangeOperator",
    "PublishSealedOperator",
    "ReconfigureOperator",
    "ResealOperator",
    "RollbackOperator",
    "SparkCorrectionOperator",
    "SparkEpochOperator",
    "VotePartitionOperator",
    "WatchDeadlineOperator",
    "partition_asset",
]
