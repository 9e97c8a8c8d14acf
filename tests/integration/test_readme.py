"""The README's "using the core without Airflow" example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.integration
def test_core_example_in_readme_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README lost its Python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "refused: pipeline 'sales': attempt 1 of epoch 2 is no longer current" in result.stdout
    assert "pointer='s3://b/totals/1'" in result.stdout
