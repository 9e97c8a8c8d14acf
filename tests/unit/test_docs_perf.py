"""scripts/docs_perf.py: the performance page's tables from a bench JSON file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "docs_perf.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def bench(tmp_path: Path, rows: list[dict[str, object]], **top: object) -> Path:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"machine": {"cores": 2, "python": "3.11.7", "groups": ["wake"]},
                                "date": "2026-11-26 14:00 UTC", "seconds": {}, "rows": rows, **top}))
    return path


def row(id: str, group: str, ours: float | None, peer: float | None, **more: object) -> dict[str, object]:
    return {"id": id, "group": group, "measure": f"measure of {id}", "ours": ours, "peer": peer, "unit": "ms",
            "peer_name": "poke sensor", "better": "lower", "note": "", "extra": {}, **more}


def test_a_small_bench_file_gives_a_table_per_group_with_ratios_machine_and_date(tmp_path):
    path = bench(tmp_path, [
        row("wake_vs_poke_5s", "wake", 3.2, 1670.0),
        row("sealing_eps_p8", "sealing", 79.7, 27.2, unit="epochs/s", better="higher", peer_name="global lock",
            extra={"run": "run 2026-11-24 06:29 UTC"}),
        row("open_requests", "open", 1, None, unit="requests", better="none", peer_name="-", note="0.6 ms"),
        row("spark_day_s", "spark", 2.35, 2.27, unit="s", peer_name="plain_loop"),
    ])
    out = tmp_path / "performance.rst"
    done = run("--bench", str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "**Run**: 2026-11-26 14:00 UTC." in text
    assert "**Machine**: cores 2; python 3.11.7." in text  # the groups run are not a property of the machine
    # groups in bench/run.py's order, each titled, only those with rows
    lines = text.splitlines()
    titles = [lines[i] for i in range(len(lines) - 1) if lines[i + 1] and set(lines[i + 1]) == {"~"}]
    assert titles == ["Waking on a seal", "Sealing throughput", "Opening an epoch", "Spark epochs",
                      "Running the benchmark"]
    # ours beside the peer of the same run, and how many times better ours is, either way round
    assert "   * - ``wake_vs_poke_5s``\n     - measure of wake_vs_poke_5s\n     - 3.2 ms\n" \
           "     - poke sensor: 1,670 ms\n     - 522x\n" in text
    assert "     - 79.7 epochs/s\n     - global lock: 27.2 epochs/s\n     - 2.93x\n" in text
    assert "measure of sealing_eps_p8 (run 2026-11-24 06:29 UTC)" in text
    # a figure of ours alone has no peer and no ratio; a loss shows below 1
    assert "     - 1 requests\n     - \\-\n     - \\-\n" in text
    assert "     - plain\\_loop: 2.27 s\n     - 0.97x\n" not in text  # an inner underscore is not escaped
    assert "     - plain_loop: 2.27 s\n     - 0.97x\n" in text


def test_groups_that_failed_in_the_run_are_named(tmp_path):
    path = bench(tmp_path, [row("wake_vs_poke_5s", "wake", 3.2, 1670.0)],
                 failed={"spark": "RuntimeError: no java"}, done=["wake"])
    out = tmp_path / "performance.rst"
    assert run("--bench", str(path), "--out", str(out)).returncode == 0
    assert "**Groups that failed in this run** (their rows are missing): spark: RuntimeError: no java." \
        in out.read_text()


def test_check_fails_when_the_tables_were_edited_by_hand(tmp_path):
    path = bench(tmp_path, [row("wake_vs_poke_5s", "wake", 3.2, 1670.0)])
    out = tmp_path / "performance.rst"
    assert run("--bench", str(path), "--out", str(out)).returncode == 0
    assert run("--bench", str(path), "--out", str(out), "--check").returncode == 0
    out.write_text(out.read_text().replace("522x", "600x"))
    done = run("--bench", str(path), "--out", str(out), "--check")
    assert done.returncode == 1 and "is not what" in done.stderr


@pytest.mark.parametrize(("change", "message"), [
    ({"date": None}, "no 'date'"),
    ({"rows": [row("x", "nonsense", 1, 2)]}, "unknown group 'nonsense'"),
    ({"rows": [row("x", "wake", 1, 2), row("x", "wake", 1, 2)]}, "row id 'x' appears twice"),
    ({"rows": [row("x", "wake", "fast", 2)]}, "ours is not a number: 'fast'"),
    ({"machine": None}, "no 'machine' object"),
])
def test_a_file_bench_run_did_not_write_is_refused_naming_what_is_wrong(tmp_path, change, message):
    path = tmp_path / "bench.json"
    data = {"machine": {"cores": 2}, "date": "today", "rows": [row("ok", "wake", 1, 2)], **change}
    path.write_text(json.dumps(data))
    out = tmp_path / "performance.rst"
    done = run("--bench", str(path), "--out", str(out))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not out.exists()  # nothing written


def test_the_committed_performance_page_is_the_scripts_output_of_the_committed_snapshot():
    done = run("--check")
    assert done.returncode == 0, done.stderr
    page = (ROOT / "docs" / "performance.rst").read_text()
    assert page.startswith(".. Generated by scripts/docs_perf.py from docs/_data/bench.json")
    assert "   * - ``sealing_eps_p64``" in page


def test_every_bench_group_has_a_table():
    """A group added to bench/run.py without a title here would make the next full run's file unreadable."""
    import ast

    def groups(path: Path, name: str) -> object:
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                return ast.literal_eval(node.value)
        raise AssertionError(f"{path}: no {name}")

    assert set(groups(ROOT / "bench" / "run.py", "GROUPS")) == set(groups(SCRIPT, "GROUPS"))
