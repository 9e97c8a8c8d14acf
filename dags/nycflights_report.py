"""Downstream of ``nycflights_daily``: the daily report, built from sealed data only.

Scheduled by Airflow on the sealed ``daily`` partition (a partitioned asset: one run per sealed
epoch, whose partition key is the epoch); the ``sealed`` sensor gates it a second time, so a manual
run (``-c '{"epoch": 3}'``) waits, deferred, until that epoch's partition is sealed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.operators import partition_asset
from airflow_epochs.sensors import SealedPartitionSensor

DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
EPOCH = "{{ dag_run.partition_key or params.epoch }}"

with DAG(
    dag_id="nycflights_report",
    schedule=PartitionedAssetTimetable(assets=partition_asset("nycflights", "daily")),
    catchup=False,
    params={"epoch": 0, "reports": str(DATA / "reports")},
    tags=["airflow-epochs", "example"],
):
    sealed = SealedPartitionSensor(task_id="sealed", pipeline="nycflights", partitions=["daily"], epoch=EPOCH,
                                   timeout=6 * 3600)

    @task
    def report(seals: dict, epoch: str, params=None) -> dict:
        """Tables and a chart for the sealed epoch (read through the seal's manifest)."""
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # the nycflights helpers beside this file
        from nycflights.report import build_report

        from airflow_epochs.coordination import EpochLedger
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        with ZooKeeperHook() as hook:
            ledger = EpochLedger(hook.get_conn(), "nycflights")
            return {**build_report(ledger, int(epoch), params["reports"]), "attempt": seals["daily"]["attempt"]}

    report(sealed.output, epoch=EPOCH)
