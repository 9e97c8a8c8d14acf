"""Operators that make epochs ordinary DAG stages (installed as ``airflow_epochs.operators``)."""

from airflow_epochs.operators.epoch import CloseEpochOperator, OpenEpochOperator, VotePartitionOperator

__all__ = ["CloseEpochOperator", "OpenEpochOperator", "VotePartitionOperator"]
