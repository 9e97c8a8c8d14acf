"""The main job in Dagster (the ``mainjob`` benchmark's second peer): daily-partitioned assets.

``flights`` and ``weather`` are the day's two cleaned inputs; ``daily`` depends on both of the same day
and on its own previous day (``TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)``, Dagster's
documented way to say a partition reads its predecessor: the running totals), so a backfill
materialises the days of ``daily`` in order; ``report`` is a downstream asset of ``daily``. The assets
run the same job files on the same Spark Connect server as the provider's DAG and the Airflow peer
(``bench/dags/mainjob_peer/jobs.py``), writing fixed folders per day.

Settings come from the environment of the Dagster daemon that runs it: ``MAINJOB_SPARK_CONNECT_URL``,
``MAINJOB_STORAGE``, ``MAINJOB_RAW``, ``MAINJOB_REPORTS``, ``MAINJOB_DAYS`` and ``MAINJOB_PIPELINE``.
"""

# No `from __future__ import annotations`: Dagster checks the context parameter's annotation as a class.
import datetime
import os
import sys
from pathlib import Path

from dagster import (
    AssetDep,
    AssetExecutionContext,
    DailyPartitionsDefinition,
    Definitions,
    MaterializeResult,
    TimeWindowPartitionMapping,
    asset,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))
from mainjob_peer.jobs import run_day, write_report

FIRST = datetime.date(2013, 1, 1)
DAYS = int(os.environ.get("MAINJOB_DAYS", "3"))
PARTITIONS = DailyPartitionsDefinition(start_date=FIRST.isoformat(),
                                       end_date=(FIRST + datetime.timedelta(days=DAYS)).isoformat())


def _epoch(context: AssetExecutionContext) -> int:
    return (datetime.date.fromisoformat(context.partition_key) - FIRST).days + 1


def _job(context: AssetExecutionContext, partition: str) -> MaterializeResult:
    manifest = run_day(os.environ["MAINJOB_SPARK_CONNECT_URL"], partition, _epoch(context),
                       storage=os.environ["MAINJOB_STORAGE"], raw=os.environ["MAINJOB_RAW"],
                       pipeline=os.environ["MAINJOB_PIPELINE"])
    return MaterializeResult(metadata={"epoch": manifest["epoch"], "spark_seconds": float(manifest["seconds"]),
                                       "rows": int(manifest["outputs"]["data"]["rows"])})


@asset(partitions_def=PARTITIONS)
def flights(context: AssetExecutionContext) -> MaterializeResult:
    return _job(context, "flights")


@asset(partitions_def=PARTITIONS)
def weather(context: AssetExecutionContext) -> MaterializeResult:
    return _job(context, "weather")


@asset(partitions_def=PARTITIONS, deps=[
    "flights", "weather",
    AssetDep("daily", partition_mapping=TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)),
])
def daily(context: AssetExecutionContext) -> MaterializeResult:
    return _job(context, "daily")


@asset(partitions_def=PARTITIONS, deps=["daily"])
def report(context: AssetExecutionContext) -> MaterializeResult:
    written = write_report(os.environ["MAINJOB_STORAGE"], os.environ["MAINJOB_PIPELINE"], _epoch(context),
                           os.environ["MAINJOB_REPORTS"])
    return MaterializeResult(metadata={"epoch": written["epoch"], "flights": written["flights"]})


defs = Definitions(assets=[flights, weather, daily, report])
