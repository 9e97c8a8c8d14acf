"""The benchmarks keep working: a smoke pass at tiny sizes (the figures themselves come from a full run).

The ``spark`` and ``scheduler`` groups are left out here (about four minutes of Spark and Airflow
start-up between them); the harnesses they stand on are the ones the Spark and scheduler tests run.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
