"""The documentation's runnable examples (docs/examples/) run as the pages show them.

Every file under docs/examples/ is named here (tests/unit/test_docs_sources.py checks that), and each
test runs the file itself, not a copy, and checks what the page says it does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"

pytestmark = pytest.mark.integration


def run_python(name: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # -I: the example imports the installed package, never a module from the working folder.
    return subprocess.run([sys.executable, "-I", str(EXAMPLES / name), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=180)


def test_core_without_airflow_runs_as_is(tmp_path):
    result = run_python("core_without_airflow.py", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "refused: pipeline 'sales': attempt 1 of epoch 2 is no longer current" in result.stdout
    assert "pointer='s3://b/totals/1'" in result.stdout
