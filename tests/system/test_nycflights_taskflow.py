"""The main example in TaskFlow style (``dags/nycflights_taskflow.py``: ``@task.spark_epoch`` tasks, no
configuration beside them) on real Spark Connect and ZooKeeper, with ``dag.test()``: three days sealed in
order, the pipeline's definition taken from the tasks, every figure equal to one Spark computation over
the same days; then a corrected weather feed of day 2 re-produced with the DAG's own tasks (their functions
give each re-produced day's inputs): exactly ``weather``@2 and ``daily``@2..3 get a new version, and the
figures equal one Spark computation over the corrected input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from airflow_epochs.coordination import EpochLedger

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "dags"))
from nycflights.check import check_sealed  # noqa: E402
from nycflights.data import correct_day, day_of_epoch, land_days  # noqa: E402
from nycflights_days import day, succeeded  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
DAYS = 3


def test_the_taskflow_main_example_seals_corrects_and_equals_one_spark_computation(dagbag, zk_connection, zk, spark,
                                                                                   spark_connect, tmp_path,
                                                                                   monkeypatch):
    raw = tmp_path / "raw"
    land_days(raw, [day_of_epoch(n) for n in range(1, DAYS + 1)])
    for name, value in (("raw", raw), ("storage", tmp_path / "lake"), ("spark_connect", spark_connect)):
        monkeypatch.setenv(f"AIRFLOW_VAR_NYCFLIGHTS_{name.upper()}", str(value))
    daily = dagbag.get_dag("nycflights_taskflow")
    assert sorted(t.task_id for t in daily.tasks) == sorted(
        ["epoch.open", "epoch.clean_flights", "epoch.hourly_weather", "epoch.clean_flights_arrives",
         "epoch.hourly_weather_arrives", "epoch.barrier", "epoch.join", "epoch.close"])
    for n in range(1, DAYS + 1):
        assert succeeded(daily.test(logical_date=day(n), run_conf={})), n
    ledger = EpochLedger(zk, "nycflights_taskflow")
    assert ledger.frontier() == DAYS
    assert ledger.config_for(1).config.to_json() == {
        "partitions": {"flights": ["clean_flights"], "weather": ["hourly_weather"], "daily": ["join"]},
        "barriers": {"ingested": ["clean_flights", "hourly_weather"]}}
    days = [day_of_epoch(n) for n in range(1, DAYS + 1)]
    result = check_sealed(spark, ledger, raw, days)
    assert result.equal, result.summary()

    assert correct_day(raw, "weather", day_of_epoch(2)) > 0
    run = dagbag.get_dag("nycflights_taskflow_correct").test(run_conf={"epoch": 2, "feed": "weather",
                                                                       "reason": "corrected weather of day 2"})
    assert succeeded(run)
    versions = {(e, p): ledger.corrections.sealed_version(e, p).version
                for e in range(1, DAYS + 1) for p in ("flights", "weather", "daily")}
    assert {k for k, v in versions.items() if v != 1} == {(2, "weather"), (2, "daily"), (3, "daily")}
    result = check_sealed(spark, ledger, raw, days)
    assert result.equal, result.summary()
