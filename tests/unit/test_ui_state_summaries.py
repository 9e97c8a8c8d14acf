"""The Epochs page's summaries, without a server: a manifest's Spark outputs and plain rows add up,
and only literal pipelines of open-epoch tasks count."""

from __future__ import annotations

from airflow_epochs.ui.dags import DagPipelines, pipelines_in
from airflow_epochs.views.model import manifest_summary


def test_manifest_summary_adds_up_spark_outputs_and_plain_rows():
    spark = {"outputs": {"data": {"rows": 5, "bytes": 10, "files": 2}, "snapshot": {"rows": 99}}, "seconds": 2}
    assert manifest_summary([spark, {"rows": 3}, None, "x"]) == {"rows": 8, "bytes": 10, "files": 2, "seconds": 2}


def test_only_literal_pipelines_of_open_epoch_tasks_count():
    data = {"dag": {"tasks": [
        {"__var": {"task_type": "OpenEpochOperator", "_task_module": "airflow_epochs.operators.epoch",
                   "pipeline": "sales", "task_id": "epoch.open"}},
        {"__var": {"task_type": "OpenEpochOperator", "_task_module": "airflow_epochs.operators.epoch",
                   "pipeline": "{{ params.p }}", "task_id": "templated"}},
        {"__var": {"task_type": "OpenEpochOperator", "_task_module": "elsewhere", "pipeline": "x", "task_id": "t"}},
        {"__var": {"task_type": "SealedPartitionSensor", "_task_module": "airflow_epochs.sensors.seals",
                   "pipeline": "consumed", "task_id": "wait"}},
    ]}}
    assert pipelines_in("d", data) == DagPipelines("d", frozenset({"sales"}), frozenset({"epoch.open"}))
    assert pipelines_in("d", None).pipelines == frozenset()


