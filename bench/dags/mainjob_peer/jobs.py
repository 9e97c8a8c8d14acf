"""The nycflights jobs as the peers run them (Airflow alone, Dagster): the same job files on the same
Spark Connect server, with no ZooKeeper, no seal, no lock and no manifest check.

What a data engineer builds without the provider: each day's output in a fixed folder per (partition,
day), overwritten by a rerun (the folder is removed, then the job writes it again); the join reads the
day's two folders and the previous day's running totals from their fixed places. Nothing says whether
a folder is complete: a reader trusts that its upstream task succeeded. The folders follow the epoch
layout (``<storage>/<pipeline>/<partition>/epoch=<e>/attempt=0/run=00000000``) so the same check and the
same report read both.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

REPO_DAGS = Path(__file__).resolve().parents[3] / "dags"
JOB_FILES = {"flights": "flights.py", "weather": "weather.py", "daily": "daily.py"}
PRODUCERS = {"flights": "clean_flights", "weather": "hourly_weather", "daily": "join"}
RUN = "00000000"  # a run id must be hex: one fixed id, the same folder every time


def jobs_folder() -> Path:
    """The nycflights job files: beside this folder in a DAGs folder copy, else the repository's."""
    for base in (Path(__file__).resolve().parents[1], REPO_DAGS):
        if (base / "nycflights" / "jobs" / "daily.py").is_file():
            return base / "nycflights" / "jobs"
    raise FileNotFoundError("the nycflights job files are not beside this module nor in the repository")


def day_folder(storage: str, pipeline: str, partition: str, epoch: int) -> str:
    """The fixed folder of ``partition``'s output for day ``epoch``."""
    from airflow_epochs.spark.storage import run_location

    return run_location(storage, pipeline, partition, epoch, 0, RUN)


def run_day(url: str, partition: str, epoch: int, *, storage: str, raw: str, pipeline: str) -> dict[str, Any]:
    """Run ``partition``'s job for day ``epoch`` into its fixed folder (replacing what a run before left);
    the manifest the job wrote (its rows, checksums and seconds)."""
    from airflow_epochs.spark.connect import run_file_on_connect
    from airflow_epochs.spark.context import EpochContext

    sys.path.insert(0, str(jobs_folder().parents[1]))
    from nycflights.data import day_of_epoch, raw_location

    folder = day_folder(storage, pipeline, partition, epoch)
    shutil.rmtree(folder, ignore_errors=True)  # a rerun overwrites the day
    snapshot = None
    if partition == "daily":
        inputs: dict[str, str] = {p: f"{day_folder(storage, pipeline, p, epoch)}/data" for p in ("flights", "weather")}
        if epoch > 1:
            snapshot = {"path": f"{day_folder(storage, pipeline, 'daily', epoch - 1)}/snapshot", "format": "parquet",
                        "epoch": epoch - 1}
    else:
        inputs = {"raw": str(raw_location(raw, partition, day_of_epoch(epoch)))}
    context = EpochContext(pipeline=pipeline, partition=partition, producer=PRODUCERS[partition], epoch=epoch,
                           attempt=0, config_version=0, run=RUN, storage=storage, inputs=inputs, snapshot=snapshot)
    return run_file_on_connect(url, str(jobs_folder() / JOB_FILES[partition]), context)


def write_report(storage: str, pipeline: str, epoch: int, reports: str) -> dict[str, Any]:
    """The day's report from the peer's fixed folders (the same report the provider's DAG writes)."""
    sys.path.insert(0, str(jobs_folder().parents[1]))
    from nycflights.report import write_report as write

    folder = day_folder(storage, pipeline, "daily", epoch)
    return write(epoch, f"{folder}/data", f"{folder}/snapshot", reports, f"Written by {pipeline} (no seal).")
