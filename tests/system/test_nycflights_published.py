"""The demo's pipeline with publishing on: each sealed day goes into the Iceberg table
``nycflights.daily`` (SQLite catalog, as the demo sets it up), and DuckDB reading that table gives the
figures of the demo's own check (one Spark computation over the same raw days)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.tables import catalog_settings, load_catalog
from airflow_epochs.tables import history as h
from airflow_epochs.tables.duckdb_reader import connect, published_check, scan_sql

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "dags"))
from nycflights.check import check_sealed, compare, one_shot  # noqa: E402
from nycflights.data import land_days  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
DAYS = 2


def _day(n: int) -> datetime:
    return datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=n - 1)


def test_demo_pipeline_publishes_daily_and_duckdb_gives_the_checks_figures(dagbag, zk_connection, zk, spark,
                                                                           spark_connect, tmp_path, monkeypatch):
    days = [_day(n).date() for n in range(1, DAYS + 1)]
    land_days(tmp_path / "raw", days)
    extra = {"catalog": "sql", "sqlite": str(tmp_path / "iceberg-catalog.db"),
             "warehouse": (tmp_path / "iceberg-warehouse").as_uri()}
    for name, value in (("raw", tmp_path / "raw"), ("storage", tmp_path / "lake"), ("spark_connect", spark_connect),
                        ("reports", tmp_path / "reports"), ("table", "nycflights.daily")):
        monkeypatch.setenv(f"AIRFLOW_VAR_NYCFLIGHTS_{name.upper()}", str(value))
    monkeypatch.setenv("AIRFLOW_CONN_NYCFLIGHTS_ICEBERG", json.dumps({"conn_type": "iceberg", "extra": extra}))
    dag = dagbag.get_dag("nycflights_daily")
    for n in range(1, DAYS + 1):
        run = dag.test(logical_date=_day(n), run_conf={})
        assert str(run.state).rsplit(".", 1)[-1].lower() == "success", n
    ledger = EpochLedger(zk, "nycflights")
    catalog = load_catalog(catalog_settings(extra=extra))
    table = catalog.load_table("nycflights.daily")
    records = [r for r in (h.published(s) for s in table.snapshots()) if r is not None]
    assert [(r.action, r.epoch) for r in records] == [("publish", e) for e in range(1, DAYS + 1)]

    # The demo's own line, and the figures of the demo's check computed on what DuckDB reads.
    ok, verdict = published_check(ledger, "nycflights_iceberg", "nycflights.daily", "daily", DAYS)
    assert ok, verdict
    duck = connect()
    duck_daily = duck.execute(f"SELECT * FROM {scan_sql(table.metadata_location)}").df()
    assert len(duck_daily) > 0
    sealed_check = check_sealed(spark, ledger, tmp_path / "raw", days)
    assert sealed_check.equal, sealed_check.summary()
    oneshot_daily, oneshot_totals = one_shot(spark, tmp_path / "raw", days)
    from airflow_epochs.spark import sealed_outputs

    [snapshot] = sealed_outputs(ledger, "daily", [DAYS], output="snapshot")
    import pandas as pd

    via_duckdb = compare(duck_daily, pd.read_parquet(snapshot.path), oneshot_daily, oneshot_totals, days)
    assert via_duckdb.equal, via_duckdb.summary()
    assert via_duckdb.summary() == sealed_check.summary()
