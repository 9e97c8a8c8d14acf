"""Shared pieces of the Iceberg publishing tests: a small Spark epoch job, a pipeline that seals its
epochs on real Spark, and catalog settings on the tests' PostgreSQL server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.spark import read_sealed, run_epoch, submit_and_seal
from airflow_epochs.tables import CatalogSettings, catalog_settings

PARTITION = "daily"
PRODUCER = "job"
KEYS = ("ams", "bcn", "cdg", "dub")


def events(epoch: int) -> list[tuple[str, int]]:
    """Deterministic (key, amount) events of an epoch: 6-9 rows."""
    return [(KEYS[(epoch * 3 + i) % len(KEYS)], epoch * 100 + i * 7) for i in range(6 + epoch % 4)]


def job_for(*, note_from: int | None = None, amount_as_text_at: int | None = None):
    """``main(spark, job)`` writing the epoch's per-key figures; from epoch ``note_from`` on it adds a
    ``note`` column, and at ``amount_as_text_at`` it writes ``amount`` as text (an incompatible change)."""

    def main(spark: Any, job: Any) -> None:
        from pyspark.sql import functions as F

        frame = spark.createDataFrame(events(job.epoch), "key string, amount long")
        daily = frame.groupBy("key").agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount"))
        daily = daily.withColumn("epoch", F.lit(job.epoch).cast("long"))
        if note_from is not None and job.epoch >= note_from:
            daily = daily.withColumn("note", F.concat(F.lit("e"), F.col("epoch").cast("string")))
        if amount_as_text_at == job.epoch:
            daily = daily.withColumn("amount", F.col("amount").cast("string"))
        job.write(daily.coalesce(1))

    return main


def new_pipeline(zk: Any, name: str) -> EpochLedger:
    ledger = EpochLedger(zk, name, owner="tests")
    ledger.create_pipeline(PipelineConfig({PARTITION: (PRODUCER,)}))
    return ledger


def seal_epoch(zk: Any, spark: Any, ledger: EpochLedger, storage: Path, epoch: int, main: Any) -> None:
    """Open ``epoch``, run ``main`` on Spark, vote its manifest (which seals the partition and epoch)."""
    attempt = ledger.open_epoch(epoch)
    outcome = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(storage),
                              runner=lambda context: run_epoch(main, spark, context))
    assert outcome.action == "ran" and outcome.partition_sealed and outcome.epoch_sealed


def sealed_frame(spark: Any, ledger: EpochLedger, through: int) -> pd.DataFrame:
    """What ``read_sealed`` gives for epochs 1..through, sorted, as pandas."""
    frame = read_sealed(spark, ledger.pipeline, PARTITION, range(1, through + 1), zookeeper=ledger,
                        with_epoch=False).toPandas()
    return normalized(frame)


def normalized(frame: pd.DataFrame) -> pd.DataFrame:
    columns = [c for c in ("epoch", "key", "events", "amount", "note") if c in frame.columns]
    out = frame[columns].sort_values(["epoch", "key"]).reset_index(drop=True)
    return out.astype({"epoch": "int64", "events": "int64", "amount": "int64"})


def pg_catalog(pg: Any, warehouse: Path) -> CatalogSettings:
    """A SQL catalog of its own (a fresh catalog name) on the tests' PostgreSQL server."""
    return catalog_settings(host="127.0.0.1", port=pg.port, login=pg.user, password=pg.password, schema="iceberg",
                            extra={"catalog": "sql", "warehouse": warehouse.as_uri(),
                                   "name": f"t{uuid.uuid4().hex[:10]}"})
