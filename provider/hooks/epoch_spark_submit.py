"""EpochSparkSubmitHook: the Spark provider's ``SparkSubmitHook`` for epoch jobs, in a module of its own.

Imported only when a job goes through ``spark-submit``: the Spark provider's submit hook costs about 0.3
CPU-seconds to import, which a task on Spark Connect has no use for (issue 50).
"""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import Connection

__all__ = ["EpochSparkSubmitHook"]


class EpochSparkSubmitHook(SparkSubmitHook):
    """The Spark provider's ``SparkSubmitHook``, answering :data:`~airflow_epochs.hooks.spark_epoch.LOCAL_SPARK_CONN`
    itself instead of looking it up (so the default local master needs no connection in the environment)."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        from airflow_epochs.hooks.spark_epoch import SparkEpochHook

        return SparkEpochHook.spark_connection(conn_id)
