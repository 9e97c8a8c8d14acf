"""Producer of the ``daily`` partition: the day's figures per carrier and per origin, joined with the
weather of each flight's departure hour, plus running totals per carrier carried from epoch to epoch.

It reads only sealed data: the ``flights`` and ``weather`` partitions of the same epoch (the barrier
has released them) and the running totals the last sealed epoch left."""

from __future__ import annotations

# [START nycflights_daily_job]
from pyspark.sql import functions as F

from airflow_epochs.spark import EpochJob, run_job


def main(spark, job: EpochJob) -> None:
    flights = job.read_input("flights")
    weather = job.read_input("weather").select("origin", "time_hour", "precip", "visib")
    adverse = (F.col("precip") > 0) | (F.col("visib") < 5)  # any precipitation, or visibility under 5 miles
    joined = flights.join(weather, ["origin", "time_hour"], "left").withColumn(
        "condition",
        F.when(F.col("precip").isNull() & F.col("visib").isNull(), F.lit("unknown"))
        .when(adverse, F.lit("adverse")).otherwise(F.lit("clear")),
    )

    def figures(dimension: str):
        return joined.groupBy(F.col(dimension).alias("key")).agg(
            # Counts with count_if, never sum(): a carrier whose every flight was cancelled has no
            # dep_delay at all, and sum() over nothing is null where the count is 0.
            F.count(F.lit(1)).alias("flights"),
            F.count_if(F.col("cancelled")).alias("cancelled"),
            F.count_if(F.col("dep_delay") > 0).alias("delayed"),
            F.avg("dep_delay").alias("mean_dep_delay"),
            F.count_if(F.col("condition") == "adverse").alias("adverse_flights"),
            F.avg(F.when(F.col("condition") == "clear", F.col("dep_delay"))).alias("clear_mean_delay"),
            F.avg(F.when(F.col("condition") == "adverse", F.col("dep_delay"))).alias("adverse_mean_delay"),
        ).withColumn("dimension", F.lit(dimension))

    daily = figures("carrier").unionByName(figures("origin")).withColumn("epoch", F.lit(job.epoch))
    job.write(daily)

    today = flights.groupBy("carrier").agg(
        F.count(F.lit(1)).alias("flights"),
        F.coalesce(F.sum("dep_delay"), F.lit(0)).cast("long").alias("delay_minutes"),
        F.count_if(F.col("cancelled")).alias("cancelled"),
    )
    previous = job.read_snapshot()
    if previous is None:
        totals = today.select("carrier", F.col("flights").cast("long").alias("cum_flights"),
                              F.col("delay_minutes").alias("cum_delay_minutes"),
                              F.col("cancelled").cast("long").alias("cum_cancelled"))
    else:
        both = previous.join(today, "carrier", "full_outer")
        totals = both.select(
            "carrier",
            (F.coalesce("cum_flights", F.lit(0)) + F.coalesce("flights", F.lit(0))).cast("long").alias("cum_flights"),
            (F.coalesce("cum_delay_minutes", F.lit(0)) + F.coalesce("delay_minutes", F.lit(0))).cast("long")
            .alias("cum_delay_minutes"),
            (F.coalesce("cum_cancelled", F.lit(0)) + F.coalesce("cancelled", F.lit(0))).cast("long")
            .alias("cum_cancelled"),
        )
    job.write_snapshot(totals.withColumn("through_epoch", F.lit(job.epoch)))


if __name__ == "__main__":
    run_job(main)
# [END nycflights_daily_job]
