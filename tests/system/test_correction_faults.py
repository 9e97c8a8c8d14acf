"""Issue 39's done-when on real parts, the faults: a correction killed (``kill -9``) in the middle of its
invalidation resumes and finishes once, and two runs of the correction at once give one re-seal.

The nycflights pipeline runs 5 days as real Airflow DAG runs of ``nycflights_daily`` on real Spark
(Connect), a real ZooKeeper and an Iceberg table; then the flights feed of day 3 arrives corrected and
``nycflights_correct`` runs in processes of its own (``tests/helpers/correct_worker.py``), which stop at a
named point (a marker file the test waits for, never a sleep):

- killed while ``SparkCorrectionOperator`` is between re-produced seals (the job of ``daily``@4 has
  written its run, its vote is not cast) or after the last seal, before the table is published; the same
  DAG run again (the scheduler's retry: the same run id, so ``ResealOperator``'s request finds the
  version it opened) finishes the correction: every planned seal re-produced once (one version each,
  sealed once, in plan order), one corrective snapshot per day, figures equal to one Spark computation
  over the corrected input, nothing else re-ran; a new DAG run of the correction while the killed one
  is unfinished is refused;
- two runs of the same correction started together: one re-seal; the other run's ``ResealOperator``
  fails naming the version in flight (nothing of it was written, its re-production never starts) and
  the winner finishes alone; two corrections of different feeds of the same day at once both land.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from airflow_db import private_airflow_db

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.tables import catalog_settings, load_catalog
from airflow_epochs.tables import history as h
from airflow_epochs.tables.duckdb_reader import published_check

REPO = Path(__file__).resolve().parents[2]
HELPERS = REPO / "tests" / "helpers"
sys.path.insert(0, str(REPO / "dags"))
from nycflights.check import check_sealed  # noqa: E402
from nycflights.data import correct_day, day_of_epoch  # noqa: E402
from nycflights_days import day, seal_days  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
DAYS = 5
CORRECTED = 3
STALE = [(e, "daily") for e in range(CORRECTED, DAYS + 1)]
CONF = {"epoch": CORRECTED, "feed": "flights", "reason": "corrected flights of day 3"}


def _pipeline(dagbag, zk, spark_connect, tmp_path, monkeypatch) -> tuple[EpochLedger, Path, dict, int]:
    """Days 1..DAYS sealed and published; then the corrected flights of day CORRECTED land. Returns the
    ledger, the raw folder, the catalog's settings and the history's last sequence number before."""
    raw, extra = seal_days(dagbag, monkeypatch, tmp_path, spark_connect, DAYS)
    ledger = EpochLedger(zk, "nycflights")
    assert ledger.frontier() == DAYS
    seen = max(e.seq for e in ledger.history())
    assert correct_day(raw, "flights", day_of_epoch(CORRECTED)) > 0
    return ledger, raw, extra, seen


class Worker:
    """A ``correct_worker.py`` process running one ``nycflights_correct`` run (its own Airflow database)."""

    def __init__(self, airflow_home: Path, home: Path, markers: Path, name: str, when: datetime,
                 hold_at: str = "", conf: dict | None = None) -> None:
        self.name = name
        self.log = home.parent / f"{name}.log"
        # The Airflow database of its own (copied once; a rerun keeps the killed run's rows, as a retry does).
        if (home / "airflow.db").exists():
            database = {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(airflow_home / "dags"),
                        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}
        else:
            database = private_airflow_db(airflow_home, home)
        env = {**os.environ, **database}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(HELPERS / "correct_worker.py"), str(airflow_home / "dags"), when.isoformat(),
                 json.dumps(conf or CONF), str(markers), name, hold_at], stdout=out, stderr=subprocess.STDOUT, env=env,
                cwd=HELPERS)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, marker: Path, timeout: float = 400) -> None:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert self.proc.poll() is None, self.text()[-6000:]
            assert time.monotonic() < deadline, self.text()[-6000:]
            time.sleep(0.1)

    def state(self, timeout: float = 600) -> str:
        self.proc.wait(timeout)
        lines = self.text().strip().splitlines()
        assert self.proc.returncode == 0 and lines, self.text()[-6000:]
        return json.loads(lines[-1])["state"]


def _go(markers: Path, *workers: Worker) -> None:
    for worker in workers:
        worker.wait_for(markers / f"ready-{worker.name}")
    (markers / "go").touch()


def _finished_once(ledger: EpochLedger, raw: Path, extra: dict, seen: int, spark) -> None:
    """The correction is done, each planned seal re-produced once, in plan order; nothing else re-ran;
    the figures and the table follow the corrected input."""
    versions = {(e, p): ledger.corrections.sealed_version(e, p).version
                for e in range(1, DAYS + 1) for p in ("flights", "weather", "daily")}
    expected = {(CORRECTED, "flights"), *STALE}
    assert {k for k, v in versions.items() if v != 1} == expected
    assert {versions[k] for k in expected} == {2}
    for key in expected:  # one version each: no version 3 opened by the rerun
        assert [(v.version, v.state) for v in ledger.corrections.versions(*key)] == [(2, "sealed")], key
    (correction,) = ledger.corrections.list()
    assert correction.state == "done" and list(correction.plan) == STALE
    events = ledger.history(since_seq=seen)
    assert not [e.event for e in events if e.event in ("epoch_opened", "attempt_started", "partition_sealed",
                                                         "epoch_sealed", "rolled_back")]
    assert [(e.detail["epoch"], e.detail["partition"]) for e in events if e.event == "version_sealed"] == [
        (CORRECTED, "flights"), *STALE]
    assert [e.detail["partition"] for e in events if e.event == "reseal_opened"].count("flights") == 1
    assert ledger.frontier() == DAYS
    result = check_sealed(spark, ledger, raw, [day_of_epoch(n) for n in range(1, DAYS + 1)])
    assert result.equal, result.summary()
    ok, verdict = published_check(ledger, "nycflights_iceberg", "nycflights.daily", "daily", DAYS)
    assert ok, verdict
    table = load_catalog(catalog_settings(extra=extra)).load_table("nycflights.daily")
    resealed = [(r.epoch, r.version) for r in (h.published(s) for s in table.snapshots())
                if r is not None and r.action == "reseal"]
    assert resealed == [(e, 2) for e, _ in STALE]


@pytest.mark.parametrize("hold_at", ["vote:3", "publish"])
def test_a_correction_killed_mid_invalidation_resumes_and_finishes_once(
        dagbag, airflow_home, zk_connection, zk, spark, spark_connect, tmp_path, monkeypatch, hold_at):
    ledger, raw, extra, seen = _pipeline(dagbag, zk, spark_connect, tmp_path, monkeypatch)
    markers, home, when = tmp_path / "markers", tmp_path / "home", day(40)
    markers.mkdir()
    killed = Worker(airflow_home, home, markers, "killed", when, hold_at)
    _go(markers, killed)
    killed.wait_for(markers / "held-killed")
    held = json.loads((markers / "held-killed").read_text())
    if hold_at == "vote:3":  # flights@3 and daily@3 re-sealed; daily@4's job has run, its vote is not cast
        assert held == {"epoch": CORRECTED + 1, "partition": "daily", "version": 2}
        assert _versions(ledger) == [2, 2, 1, 1]
    else:  # every planned seal re-sealed; nothing published yet
        assert _versions(ledger) == [2, 2, 2, 2]
    os.kill(killed.proc.pid, signal.SIGKILL)
    assert killed.proc.wait(30) == -signal.SIGKILL
    table = load_catalog(catalog_settings(extra=extra)).load_table("nycflights.daily")
    assert not [s for s in table.snapshots() if (r := h.published(s)) is not None and r.action == "reseal"]

    if hold_at == "vote:3":
        # Meanwhile a new DAG run of the correction (another request): refused, nothing written; the
        # correction in flight is the killed run's to finish. (Killed at the publish, the correction was
        # done: a new request would be a new correction, and its run publishes both.)
        other = Worker(airflow_home, tmp_path / "home-other", markers, "other", day(41))
        _go(markers, other)
        assert other.state() == "failed"
        assert "is still re-producing the seals that read it" in other.text()
        assert [v.version for v in ledger.corrections.versions(CORRECTED, "flights")] == [2]

    # The same DAG run again, as the scheduler's next try would run it: it finishes the correction.
    again = Worker(airflow_home, home, markers, "again", when)
    _go(markers, again)
    assert again.state() == "success", again.text()[-6000:]
    _finished_once(ledger, raw, extra, seen, spark)


def test_two_runs_of_one_correction_at_once_give_one_reseal(dagbag, airflow_home, zk_connection, zk, spark,
                                                            spark_connect, tmp_path, monkeypatch):
    ledger, raw, extra, seen = _pipeline(dagbag, zk, spark_connect, tmp_path, monkeypatch)
    markers = tmp_path / "markers"
    markers.mkdir()
    # Two DAG runs (two logical dates, so two request ids), each in its own process; whichever re-seals
    # first holds before its first vote until the other run has answered.
    workers = [Worker(airflow_home, tmp_path / f"home-{name}", markers, name, day(40 + i), "vote:1")
               for i, name in enumerate(("one", "two"))]
    _go(markers, *workers)
    deadline = time.monotonic() + 400
    while not any(w.proc.poll() is not None for w in workers):
        assert time.monotonic() < deadline, [w.text()[-3000:] for w in workers]
        time.sleep(0.2)
    (loser,) = [w for w in workers if w.proc.poll() is not None]
    (winner,) = [w for w in workers if w is not loser]
    winner.wait_for(markers / f"held-{winner.name}")
    assert loser.state() == "failed"
    assert "version 2 of 'flights' at epoch 3 is being re-sealed" in loser.text()
    assert not (markers / f"held-{loser.name}").exists()  # it re-produced nothing
    (version,) = ledger.corrections.versions(CORRECTED, "flights")
    assert (version.version, version.state) == (2, "open")
    (markers / "release").touch()
    assert winner.state() == "success", winner.text()[-6000:]
    _finished_once(ledger, raw, extra, seen, spark)


def test_two_corrections_of_one_day_at_once_both_land(dagbag, airflow_home, zk_connection, zk, spark, spark_connect,
                                                      tmp_path, monkeypatch):
    """The flights and the weather of day 3 corrected at once, by two runs: both re-seals are allowed (they
    are different keys). The seals both reach (``daily``@3..5) can have one version open at a time: the
    correction that opened one first re-produces it, the other waits for it to seal and then re-produces
    it again (it read the other feed's old version), in epoch order. The end: each feed one new version,
    each ``daily`` at most one new version per correction, every figure over both corrected inputs."""
    ledger, raw, extra, seen = _pipeline(dagbag, zk, spark_connect, tmp_path, monkeypatch)
    assert correct_day(raw, "weather", day_of_epoch(CORRECTED)) > 0
    markers = tmp_path / "markers"
    markers.mkdir()
    confs = {"flights": CONF, "weather": {**CONF, "feed": "weather", "reason": "corrected weather of day 3"}}
    workers = [Worker(airflow_home, tmp_path / f"home-{feed}", markers, feed, day(40 + i), conf=conf)
               for i, (feed, conf) in enumerate(confs.items())]
    _go(markers, *workers)
    for worker in workers:
        assert worker.state() == "success", worker.text()[-6000:]

    corrections = ledger.corrections.list()
    assert sorted(c.origin for c in corrections) == [(CORRECTED, "flights", 2), (CORRECTED, "weather", 2)]
    assert all(c.state == "done" for c in corrections)
    for feed in ("flights", "weather"):
        assert [(v.version, v.state) for v in ledger.corrections.versions(CORRECTED, feed)] == [(2, "sealed")]
    for epoch, partition in STALE:
        entries = ledger.corrections.versions(epoch, partition)
        assert all(v.state == "sealed" for v in entries) and 1 <= len(entries) <= 2, entries
        assert len({v.correction for v in entries}) == len(entries)  # one version per correction at most
        assert ledger.corrections.sealed_version(epoch, partition).version == 1 + len(entries)
    for epoch in (1, 2):
        assert ledger.corrections.sealed_version(epoch, "daily").version == 1
    events = ledger.history(since_seq=seen)
    assert not [e.event for e in events if e.event in ("epoch_opened", "attempt_started", "partition_sealed",
                                                         "epoch_sealed", "rolled_back")]
    result = check_sealed(spark, ledger, raw, [day_of_epoch(n) for n in range(1, DAYS + 1)])
    assert result.equal, result.summary()  # both corrections are in every figure
    ok, verdict = published_check(ledger, "nycflights_iceberg", "nycflights.daily", "daily", DAYS)
    assert ok, verdict
    table = load_catalog(catalog_settings(extra=extra)).load_table("nycflights.daily")
    resealed = [(r.epoch, r.version) for r in (h.published(s) for s in table.snapshots())
                if r is not None and r.action == "reseal"]
    for epoch, partition in STALE:  # one corrective snapshot per version at most; the last is the newest
        mine = [v for e, v in resealed if e == epoch]
        newest = ledger.corrections.sealed_version(epoch, partition).version
        assert mine and len(mine) == len(set(mine)) and mine[-1] == newest


def _versions(ledger):
    """The newest sealed version of the corrected partition and of each stale seal."""
    return [ledger.corrections.sealed_version(e, p).version for e, p in [(CORRECTED, "flights"), *STALE]]
