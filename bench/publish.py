"""Publishing benchmark: what publishing a sealed partition into an Iceberg table adds to an epoch.

Two pipelines run the same small Spark epoch job (classic local[2] session, one Parquet file per
epoch) on the same ZooKeeper, interleaved epoch by epoch: one seals only, the other seals and then
publishes (pyiceberg ``add_files`` into a SQLite SQL catalog, one snapshot per epoch, the duplicate
check and the rollback mirror included).

    python bench/publish.py [--smoke]      # alone; bench/run.py includes it (--only publish)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import compare
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper
from airflow_epochs.spark import run_epoch, submit_and_seal
from airflow_epochs.tables import catalog_settings, load_catalog, publish_sealed


def _job(spark: Any, job: Any) -> None:
    from pyspark.sql import functions as F

    rows = [(f"k{(job.epoch * 7 + i) % 13}", job.epoch * 1000 + i) for i in range(2000)]
    frame = spark.createDataFrame(rows, "key string, amount long")
    daily = frame.groupBy("key").agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount"))
    job.write(daily.withColumn("epoch", F.lit(job.epoch).cast("long")).coalesce(1))


def run_all(hosts: str, smoke: bool) -> None:
    from pyspark.sql import SparkSession

    epochs = 3 if smoke else 12
    spark = (SparkSession.builder.master("local[2]").appName("epochs-bench-publish")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=30)
    try:
        with tempfile.TemporaryDirectory(prefix="epochs-bench-publish-") as tmp:
            base = Path(tmp)
            os.environ["AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS"] = str(base)  # an allow-list, closed when unset
            catalog = load_catalog(catalog_settings(extra={"catalog": "sql", "sqlite": str(base / "catalog.db"),
                                                           "warehouse": (base / "warehouse").as_uri()}))
            ledgers = {}
            for way in ("sealed", "published"):
                ledgers[way] = EpochLedger(zk, f"publish-bench-{way}-{os.getpid()}", owner="bench")
                ledgers[way].create_pipeline(PipelineConfig({"daily": ("job",)}))
            timings: dict[str, list[float]] = {"sealed": [], "published": []}
            publish_only: list[float] = []
            for epoch in range(1, epochs + 1):
                order = ("sealed", "published") if epoch % 2 else ("published", "sealed")
                for way in order:
                    ledger = ledgers[way]
                    started = time.perf_counter()
                    attempt = ledger.open_epoch(epoch)
                    submit_and_seal(zk, attempt, "daily", "job", storage=str(base / way),
                                    runner=lambda context: run_epoch(_job, spark, context))
                    if way == "published":
                        sealed_at = time.perf_counter()
                        outcome = publish_sealed(ledger, catalog, "bench.daily", "daily", epoch)
                        assert [r.epoch for r in outcome.published] == [epoch], outcome
                        publish_only.append(time.perf_counter() - sealed_at)
                    timings[way].append(time.perf_counter() - started)
            # The first epoch of each warms Spark and creates the table: leave it out.
            ours, peer = timings["published"][1:], timings["sealed"][1:]
            overhead = 100 * (statistics.median(ours) / statistics.median(peer) - 1)
            compare("publish_overhead_epoch_s", "publish", "one small Spark epoch sealed and published, median",
                    ours, peer, "s", "sealed only",
                    note=f"{len(ours)} epochs each, interleaved, after the first; publish step alone median "
                         f"{statistics.median(publish_only[1:]):.3f} s; overhead {overhead:+.0f}% "
                         "(pyiceberg add_files, SQLite SQL catalog)")
    finally:
        zk.stop()
        zk.close()
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        run_all(server.hosts, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
