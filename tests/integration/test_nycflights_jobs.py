"""The nycflights Spark jobs on a day with a carrier whose every flight was cancelled (2013-01-13:
YV's one flight): its counts are 0, not null, and every figure of the day equals pandas'."""

from __future__ import annotations

import sys
import uuid
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from airflow_epochs.spark import EpochContext, run_epoch
from airflow_epochs.spark.connect import load_main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "dags"))
from nycflights.data import epoch_of_day, land_days, raw_location  # noqa: E402
from nycflights_reference import reference, source_tables  # noqa: E402

DAY = date(2013, 1, 13)


def _run(spark, job: str, partition: str, inputs: dict, storage: Path) -> str:
    context = EpochContext(pipeline="nycflights", partition=partition, producer=partition, epoch=epoch_of_day(DAY),
                           attempt=1, config_version=1, run=uuid.uuid4().hex[:16], storage=str(storage),
                           inputs=inputs)
    manifest = run_epoch(load_main(str(REPO / "dags" / "nycflights" / "jobs" / job)), spark, context)
    return str(manifest["outputs"]["data"]["path"])


def test_a_carrier_with_every_flight_cancelled_counts_zero_not_null(spark, tmp_path):
    land_days(tmp_path / "raw", [DAY])
    storage = tmp_path / "lake"
    flights = _run(spark, "flights.py", "flights", {"raw": str(raw_location(tmp_path / "raw", "flights", DAY))},
                   storage)
    weather = _run(spark, "weather.py", "weather", {"raw": str(raw_location(tmp_path / "raw", "weather", DAY))},
                   storage)
    daily = _run(spark, "daily.py", "daily", {"flights": flights, "weather": weather}, storage)

    got = pd.read_parquet(daily).drop(columns=["epoch"]).sort_values(["dimension", "key"]).reset_index(drop=True)
    yv = got[(got.dimension == "carrier") & (got.key == "YV")].iloc[0]
    assert (yv.flights, yv.cancelled, yv.delayed, yv.adverse_flights) == (1, 1, 0, 0)
    assert pd.isna(yv.mean_dep_delay)  # a mean over no departures stays undefined
    for column in ("flights", "cancelled", "delayed", "adverse_flights"):
        assert not got[column].isna().any(), column
    want = reference(DAY, *source_tables())
    assert got[["dimension", "key"]].values.tolist() == want[["dimension", "key"]].values.tolist()
    for column in ("flights", "cancelled", "delayed", "adverse_flights"):
        assert got[column].tolist() == want[column].tolist(), column
    for column in ("mean_dep_delay", "clear_mean_delay", "adverse_mean_delay"):
        pd.testing.assert_series_equal(got[column].astype(float), want[column].astype(float), check_names=False,
                                       rtol=1e-9)


def test_the_demo_check_finds_a_null_count_and_any_differing_row():
    from nycflights.check import compare

    days = [date(2013, 1, 1)]
    row = {"epoch": 1, "dimension": "carrier", "key": "YV", "flights": 1, "cancelled": 1, "delayed": 0,
           "mean_dep_delay": float("nan"), "adverse_flights": 0, "clear_mean_delay": float("nan"),
           "adverse_mean_delay": float("nan")}
    other = {**row, "key": "AA", "flights": 10, "cancelled": 0, "delayed": 4, "mean_dep_delay": 3.5,
             "clear_mean_delay": 3.5}
    totals = pd.DataFrame([{"carrier": "AA", "cum_flights": 10, "cum_delay_minutes": 35, "cum_cancelled": 0}])
    oneshot = pd.DataFrame([row, other])

    same = compare(pd.DataFrame([row, other]), totals, oneshot, totals, days)
    assert same.equal and same.summary().endswith("2 daily rows and 1 running totals, all equal")
    assert same.zero_counts == ["epoch 1 carrier YV: 1 flight(s), all cancelled, delayed = 0"]

    null_delayed = compare(pd.DataFrame([{**row, "delayed": None}, other]), totals, oneshot, totals, days)
    assert not null_delayed.equal and null_delayed.mismatches == 1
    assert "| null / 0 |" in null_delayed.markdown()
    off_mean = compare(pd.DataFrame([row, {**other, "mean_dep_delay": 3.6}]), totals, oneshot, totals, days)
    assert off_mean.mismatches == 1
    missing = compare(pd.DataFrame([row]), totals, oneshot, totals, days)
    assert missing.mismatches == 1
    doubled = compare(pd.DataFrame([row, other]), totals.assign(cum_flights=20), oneshot, totals, days)
    assert doubled.mismatches == 1 and "| AA | 20 / 10 |" in doubled.markdown()
