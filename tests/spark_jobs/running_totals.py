"""A stateful epoch job for the tests: per-key totals of the epoch, plus running totals carried from
the last sealed snapshot. Faults are injected through a ``faults`` input folder: a file
``epoch-<e>`` names the fault, and the first run that claims it (atomic rename) carries it out."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pyspark.sql import functions as F

from airflow_epochs.spark import EpochJob, run_job


def claim_fault(job: EpochJob) -> str | None:
    folder = job.context.inputs.get("faults")
    if not folder:
        return None
    target = Path(folder) / f"epoch-{job.epoch}"
    claimed = Path(folder) / f"claimed-{job.epoch}-{job.context.run}"
    try:
        os.rename(target, claimed)
    except FileNotFoundError:
        return None
    return claimed.read_text().strip()


def main(spark, job: EpochJob) -> None:
    fault = claim_fault(job)
    events = job.read_input("events", format="csv", header="true", inferSchema="false")
    today = (events.select(F.col("key"), F.col("amount").cast("long").alias("amount"))
             .groupBy("key").agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount")))
    previous = job.read_snapshot()
    if previous is None:
        totals = today.select("key", F.col("events").alias("total_events"), F.col("amount").alias("total_amount"))
    else:
        totals = (previous.join(today, "key", "full_outer")
                  .select("key", (F.coalesce("total_events", F.lit(0)) + F.coalesce("events", F.lit(0)))
                          .alias("total_events"),
                          (F.coalesce("total_amount", F.lit(0)) + F.coalesce("amount", F.lit(0)))
                          .alias("total_amount")))
    job.write(today.withColumn("epoch", F.lit(job.epoch)))
    if fault == "kill_driver":
        os.kill(os.getpid(), signal.SIGKILL)
    job.write_snapshot(totals)
    if fault == "fail_after_write":
        raise RuntimeError(f"injected failure after writing epoch {job.epoch}, before the manifest")
    if fault and fault.startswith("hold:"):
        release = Path(fault.split(":", 1)[1])
        (release.parent / f"held-{job.epoch}-{job.context.run}").write_text(str(os.getpid()))
        while not release.exists():
            time.sleep(0.2)


if __name__ == "__main__":
    run_job(main)
