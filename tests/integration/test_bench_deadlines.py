"""The deadlines benchmark keeps working (a smoke pass at tiny sizes): every row there, no false and no
missed alert, the alert within a second of its deadline, a prediction read a bounded number of times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "run.py"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_deadlines_bench_smoke_reports_its_rows(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCH), "--smoke", "--out", str(out), "--only", "deadlines"],
                            capture_output=True, text=True, timeout=500)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["id"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"deadline_alert_latency_s_p50", "deadline_alert_latency_s_max", "deadline_false_alerts",
                         "deadline_missed_alerts", "predicted_seal_error_pct", "predict_requests_per_epoch",
                         "deadline_moved_alert_latency_s_max", "deadline_100_watches_alert_latency_s_p50",
                         "deadline_100_watches_alert_latency_s_max"}
    assert rows["deadline_false_alerts"]["ours"] == 0 and rows["deadline_missed_alerts"]["ours"] == 0
    assert 0 <= rows["deadline_alert_latency_s_max"]["ours"] < 1.0
    # a faster producer late: the slowest one's vote moved the deadline earlier, and the alert followed it
    assert 0 <= rows["deadline_moved_alert_latency_s_max"]["ours"] < 1.0
    assert 0 < rows["predict_requests_per_epoch"]["ours"] <= 12
    assert rows["predicted_seal_error_pct"]["peer"] is not None
    # a hundred watches of one deadline: every one alerted (else the bench fails), ours beside the peer
    many = rows["deadline_100_watches_alert_latency_s_max"]
    assert 0 <= rows["deadline_100_watches_alert_latency_s_p50"]["ours"] <= many["ours"]
    assert many["peer"] is not None and many["advantage"] is not None
