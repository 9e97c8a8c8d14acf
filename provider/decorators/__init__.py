"""TaskFlow decorators of the provider, registered through its provider info (``task-decorators``):

- ``@task.spark_epoch(partition=..., application=...)``: a :class:`~airflow_epochs.operators.SparkEpochOperator`
  whose function gives the job's inputs, or (without ``application``) whose function is the Spark job
  itself, ``main(spark, job)``, run on a Spark Connect session (:mod:`.spark_epoch`);
- ``@task.epoch_producer(partition=...)``: a Python producer whose returned manifest is its vote
  (:mod:`.producer`).

Both are epoch stages: inside an :class:`~airflow_epochs.operators.EpochGroup` they find the epoch's
attempt, are collected into the pipeline's definition, and (``inline_stages``) open or close the epoch.
"""

from __future__ import annotations

__all__ = ["epoch_producer_task", "spark_epoch_task"]


def __getattr__(name: str) -> object:
    # Imported on first use: ``airflow_epochs`` itself imports nothing from Airflow.
    if name == "spark_epoch_task":
        from airflow_epochs.decorators.spark_epoch import spark_epoch_task

        return spark_epoch_task
    if name == "epoch_producer_task":
        from airflow_epochs.decorators.producer import epoch_producer_task

        return epoch_producer_task
    raise AttributeError(name)
