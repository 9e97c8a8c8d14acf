"""The benchmarks keep working: a smoke pass at tiny sizes (the figures themselves come from a full run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "run.py"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_bench_smoke_fills_every_measured_row(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCH), "--smoke", "--out", str(out)], capture_output=True,
                            text=True, timeout=1400)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["machine"]["cores"] >= 1
    measured = [row for row in report["rows"] if not row["note"].startswith("not measured")]
    assert any(row["measure"].startswith("barrier release p50") for row in measured)
    for row in measured:
        assert row["ours"] is not None and row["ours"] > 0, row
        if row["peer_name"] != "-":
            assert row["peer"] is not None and row["peer"] > 0, row
    assert "peer/ours" in result.stdout
