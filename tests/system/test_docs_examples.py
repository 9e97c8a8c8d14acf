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


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    cli = str(Path(sys.executable).parent / "airflow-epochs")
    return subprocess.run([cli, "analyze", *args], cwd=ROOT, capture_output=True, text=True, timeout=180)


def test_the_analysis_page_shows_what_the_command_prints():
    """docs/guides/analysis.rst includes these files as the command's output: they must be it, exactly."""
    sealed = analyze("dags/example_word_count.py")
    assert sealed.returncode == 0, sealed.stderr[-2000:]
    assert sealed.stdout == (EXAMPLES / "analyze_word_count.txt").read_text()
    under = analyze("dags/example_under_coordinated.py")
    assert under.returncode == 1
    assert under.stdout == (EXAMPLES / "analyze_under_coordinated.txt").read_text()
    assert "under-coordination: task 'count': missing Seal[epoch]" in under.stderr
    dot = analyze("dags/example_word_count.py", "--format", "dot")
    assert dot.returncode == 0, dot.stderr[-2000:]
    assert dot.stdout == (EXAMPLES / "analyze_word_count.dot").read_text()
    assert (ROOT / "docs" / "analyze_word_count.png").stat().st_size > 20_000
