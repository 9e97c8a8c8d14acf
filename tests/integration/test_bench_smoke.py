"""The benchmarks keep working: a smoke pass at tiny sizes (the figures themselves come from a full run).

The ``spark`` and ``scheduler`` groups are left out here (about four minutes of Spark and Airflow
start-up between them); the harnesses they stand on are the ones the Spark and scheduler tests run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "run.py"


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCH), "--smoke", "--out", str(out), *args], capture_output=True,
                            text=True, timeout=1400)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "x better" in result.stdout
    return json.loads(out.read_text())


SMOKE_GROUPS = "wake,cost,barrier,sealing,open,growth,capacity,waiters,ui"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_bench_smoke_fills_every_measured_row(tmp_path):
    report = _run(tmp_path, "--only", SMOKE_GROUPS)
    assert report["machine"]["cores"] >= 1
    ids = [row["id"] for row in report["rows"]]
    assert len(ids) == len(set(ids)), "row ids must be unique"
    groups = {row["group"] for row in report["rows"]}
    assert groups == set(report["machine"]["groups"]), groups
    for row in report["rows"]:
        assert row["ours"] is not None and row["ours"] > 0, row
        if row["better"] != "none":
            assert row["peer"] is not None and row["peer"] > 0, row
            assert row["advantage"] is not None
    for wanted in ("sealing_eps_p1", "open_requests", "growth_snapshot_requests", "growth_znodes",
                   "barrier_p50_n10", "barrier_requests_n10", "waiters_wake_p50_n50", "capacity_10k_tx_per_s",
                   "ui_grid_10k_ms"):
        assert wanted in ids, wanted


@pytest.mark.integration
def test_only_runs_the_named_groups(tmp_path):
    report = _run(tmp_path, "--only", "open,growth")
    assert {row["group"] for row in report["rows"]} == {"open", "growth"}
    bad = subprocess.run([sys.executable, str(BENCH), "--only", "sealing,nonsense"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "unknown group(s) nonsense" in bad.stderr


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.ensemble
@pytest.mark.timeout(900)
def test_reconnect_bench_smoke_reports_its_rows(tmp_path):
    """The failover group (its own 3-node ensemble): every row there for both sides, no seal missed by
    ours, and fewer requests per waiter than a client per waiter needs."""
    report = _run(tmp_path, "--only", "reconnect")
    rows = {row["id"]: row for row in report["rows"]}
    assert set(rows) == {"reconnect_rearm_s_n50", "reconnect_requests_n50", "reconnect_inflight_max_n50",
                         "reconnect_missed_seals_n50"}
    assert rows["reconnect_missed_seals_n50"]["ours"] == 0
    assert rows["reconnect_rearm_s_n50"]["ours"] > 0 and rows["reconnect_rearm_s_n50"]["peer"] > 0
    assert 0 < rows["reconnect_requests_n50"]["ours"] < rows["reconnect_requests_n50"]["peer"]


@pytest.mark.integration
def test_a_failing_group_is_reported_and_the_others_keep_their_rows(tmp_path):
    """One group raises (made to by EPOCHS_BENCH_FAIL_GROUP): the run goes on, the groups before and
    after it keep their rows in the JSON, the failure is recorded with its error, and the exit status is 1."""
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCH), "--smoke", "--out", str(out), "--only", "open,cost,growth"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "EPOCHS_BENCH_FAIL_GROUP": "cost"})
    assert result.returncode == 1, result.stderr[-3000:]
    assert "group cost FAILED: RuntimeError: group cost made to fail by EPOCHS_BENCH_FAIL_GROUP" in result.stderr
    report = json.loads(out.read_text())
    assert report["failed"] == {"cost": "RuntimeError: group cost made to fail by EPOCHS_BENCH_FAIL_GROUP"}
    assert report["done"] == ["open", "growth"]
    assert {row["group"] for row in report["rows"]} == {"open", "growth"}
    ids = {row["id"] for row in report["rows"]}
    assert {"open_requests", "growth_snapshot_requests", "growth_znodes"} <= ids, ids


@pytest.mark.integration
def test_the_rows_of_finished_groups_are_on_disk_while_the_run_goes_on(tmp_path):
    """The JSON is rewritten after each group: a run interrupted in its second group has the first one's rows."""
    out = tmp_path / "bench.json"
    out.write_text('{"rows": [{"id": "left by an earlier run"}]}')
    proc = subprocess.Popen([sys.executable, str(BENCH), "--smoke", "--out", str(out), "--only", "open,waiters"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        report: dict = {}
        while "open" not in report.get("done", ()):
            assert proc.poll() is None, "the run ended before the first group's rows were seen"
            assert time.monotonic() < deadline, report
            time.sleep(0.2)
            report = json.loads(out.read_text())  # never half a file: it is replaced in one step
        assert "waiters" not in report["done"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    after = json.loads(out.read_text())
    assert {row["group"] for row in after["rows"]} >= {"open"}
    assert "left by an earlier run" not in {row["id"] for row in after["rows"]}
