"""An epoch job for the lineage tests that reads a sealed partition of the same epoch (``sealed_inputs``
name ``totals``) and writes its row count per key."""

from __future__ import annotations

from pyspark.sql import functions as F

from airflow_epochs.spark import EpochJob, run_job


def main(spark, job: EpochJob) -> None:
    totals = job.read_input("totals", format="parquet")
    job.write(totals.groupBy("key").agg(F.sum("events").alias("events")).withColumn("epoch", F.lit(job.epoch)))


if __name__ == "__main__":
    run_job(main)
