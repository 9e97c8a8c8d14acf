"""Producer of the ``flights`` partition: one day's raw flights, cleaned and typed."""

from __future__ import annotations

from pyspark.sql import functions as F

from airflow_epochs.spark import EpochJob, run_job


def main(spark, job: EpochJob) -> None:
    raw = job.read_input("raw", format="csv", header="true", nullValue="NA")
    cleaned = raw.select(
        F.make_date(F.col("year").cast("int"), F.col("month").cast("int"), F.col("day").cast("int")).alias("date"),
        F.col("carrier"),
        F.col("flight").cast("int").alias("flight"),
        F.col("tailnum"),
        F.col("origin"),
        F.col("dest"),
        F.col("sched_dep_time").cast("int").alias("sched_dep_time"),
        F.col("dep_time").cast("int").alias("dep_time"),
        F.col("dep_delay").cast("int").alias("dep_delay"),
        F.col("arr_delay").cast("int").alias("arr_delay"),
        F.col("distance").cast("int").alias("distance"),
        F.to_timestamp("time_hour").alias("time_hour"),
        F.col("dep_time").isNull().alias("cancelled"),
    )
    job.write(cleaned)


if __name__ == "__main__":
    run_job(main)
