"""The nycflights example's days sealed and published in-process (``dag.test()``), for the tests that
correct a day afterwards: the Variables and the Iceberg connection pointed at a test's own folders."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "dags"))
from nycflights.data import day_of_epoch, land_days


def day(n: int) -> datetime:
    """The logical date of epoch ``n`` (day 1 is 2013-01-01, the dataset's first)."""
    return datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=n - 1)


def succeeded(run: Any) -> bool:
    """Whether a ``dag.test()`` run ended in success."""
    return str(run.state).rsplit(".", 1)[-1].lower() == "success"


def seal_days(dagbag: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spark_connect: str,
              days: int) -> tuple[Path, dict[str, str]]:
    """Land days 1..``days``, point the nycflights Variables and Iceberg connection at ``tmp_path`` and run
    ``nycflights_daily`` for each day, each run asserted successful. Returns the raw folder and the
    catalog connection's extra."""
    raw = tmp_path / "raw"
    land_days(raw, [day_of_epoch(n) for n in range(1, days + 1)])
    extra = {"catalog": "sql", "sqlite": str(tmp_path / "iceberg-catalog.db"),
             "warehouse": (tmp_path / "iceberg-warehouse").as_uri()}
    for name, value in (("raw", raw), ("storage", tmp_path / "lake"), ("spark_connect", spark_connect),
                        ("reports", tmp_path / "reports"), ("table", "nycflights.daily")):
        monkeypatch.setenv(f"AIRFLOW_VAR_NYCFLIGHTS_{name.upper()}", str(value))
    monkeypatch.setenv("AIRFLOW_CONN_NYCFLIGHTS_ICEBERG", json.dumps({"conn_type": "iceberg", "extra": extra}))
    daily = dagbag.get_dag("nycflights_daily")
    for n in range(1, days + 1):
        assert succeeded(daily.test(logical_date=day(n), run_conf={})), n
    return raw, extra
