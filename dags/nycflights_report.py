"""Downstream of ``nycflights_daily``: the daily report, built from sealed data only.

Scheduled by Airflow on the sealed ``daily`` partition (a partitioned asset: one run per sealed
epoch, whose partition key is the epoch); the ``sealed`` sensor gates it a second time, so a manual
run (``-c '{"epoch": 3}'``) waits, deferred, until that epoch's partition is sealed. Reports go to the
folder the Airflow Variable ``nycflights_reports`` names (default ``$AIRFLOW_EPOCHS_DATA/reports``):
the deployment's choice, not a run param.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_epochs.analysis import blazes_label
from airflow_epochs.operators import partition_asset
from airflow_epochs.retries import TASK_RETRY_DEFAULTS, EpochsRetryPolicy
from airflow_epochs.sensors import SealedPartitionSensor

DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
EPOCH = "{{ dag_run.partition_key or params.epoch }}"

# [START nycflights_report]
with DAG(
    dag_id="nycflights_report",
    schedule=PartitionedAssetTimetable(assets=partition_asset("nycflights", "daily")),
    catchup=False,
    params={"epoch": 0},
    tags=["airflow-epochs", "example"],
    # The report task reads ZooKeeper itself: the provider's retry decisions apply to it too.
    default_args={**TASK_RETRY_DEFAULTS, "retry_policy": EpochsRetryPolicy()},
):
    sealed = SealedPartitionSensor(task_id="sealed", pipeline="nycflights", partitions=["daily"], epoch=EPOCH,
                                   deferrable=True, timeout=6 * 3600)

    @task
    def report(seals: dict, epoch: str) -> dict:
        """Tables and a chart for the sealed epoch (read through the seal's manifest)."""
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # the nycflights helpers beside this file
        from airflow.sdk import Variable
        from nycflights.report import build_report

        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        reports = Variable.get("nycflights_reports", default=str(DATA / "reports"))
        with ZooKeeperHook() as hook:
            ledger = hook.ledger("nycflights")
            return {**build_report(ledger, int(epoch), reports), "attempt": seals["daily"]["attempt"]}

    # It writes the epoch's report files from the epoch's sealed data only (for `airflow-epochs analyze`).
    blazes_label(report(sealed.output, epoch=EPOCH), "OW", gate=("epoch",))
# [END nycflights_report]
