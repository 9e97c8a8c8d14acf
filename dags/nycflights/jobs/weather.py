"""Producer of the ``weather`` partition: hourly observations per origin airport for one day.

The source repeats a few hours (daylight-saving change); one row per (origin, hour) remains, with
the worst conditions of the repeats."""

from __future__ import annotations

from pyspark.sql import functions as F

from airflow_epochs.spark import EpochJob, run_job


def main(spark, job: EpochJob) -> None:
    raw = job.read_input("raw", format="csv", header="true", nullValue="NA")
    hourly = (
        raw.select(F.col("origin"), F.to_timestamp("time_hour").alias("time_hour"),
                   F.col("temp").cast("double").alias("temp"), F.col("precip").cast("double").alias("precip"),
                   F.col("visib").cast("double").alias("visib"),
                   F.col("wind_speed").cast("double").alias("wind_speed"))
        .groupBy("origin", "time_hour")
        .agg(F.max("temp").alias("temp"), F.max("precip").alias("precip"), F.min("visib").alias("visib"),
             F.max("wind_speed").alias("wind_speed"))
    )
    job.write(hourly)


if __name__ == "__main__":
    run_job(main)
