"""The documentation's runnable examples (docs/examples/) run as the pages show them.

Every file under docs/examples/ is named here (tests/unit/test_docs_sources.py checks that), and each
test runs the file itself, not a copy, and checks what the page says it does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig

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


def load_example(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_iceberg_reads_time_travel_cut_and_duckdb(zk, zk_connection, spark, tmp_path, monkeypatch):
    """iceberg_reads.py against two tables of real sealed Spark epochs, published into a SQLite catalog
    that the Airflow connection ``iceberg_default`` names."""
    from tables_helpers import job_for, normalized

    from airflow_epochs.spark import read_sealed, run_epoch, submit_and_seal
    from airflow_epochs.tables import load_catalog, publish_sealed, settings_from_connection

    extra = {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "wh").as_uri()}
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_DEFAULT", json.dumps({"conn_type": "iceberg", "extra": extra}))
    catalog = load_catalog(settings_from_connection("iceberg_default"))
    tables = {"daily": "lake.daily", "weekly": "lake.weekly"}
    ledger = EpochLedger(zk, "docs_lake", owner="docs")
    ledger.create_pipeline(PipelineConfig({partition: ("job",) for partition in tables}))
    main = job_for()
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        for partition, table in tables.items():
            outcome = submit_and_seal(zk, attempt, partition, "job", storage=str(tmp_path / "store"),
                                      runner=lambda context: run_epoch(main, spark, context))
            assert outcome.partition_sealed
            publish_sealed(ledger, catalog, table, partition, epoch)

    def sealed_rows(partition: str, through: int) -> pd.DataFrame:
        return normalized(read_sealed(spark, ledger.pipeline, partition, range(1, through + 1), zookeeper=ledger,
                                      with_epoch=False).toPandas())

    example = load_example("iceberg_reads")

    rows, frame = example.as_of_epoch(spark, 1)
    want = sealed_rows("daily", 1)
    pd.testing.assert_frame_equal(normalized(rows.to_pandas()), want)
    pd.testing.assert_frame_equal(normalized(frame.toPandas()), want)

    cut, daily, weekly = example.consistent_cut(catalog, 2)  # through zookeeper_default: this test's chroot
    assert cut.epoch == 2 and {m.table for m in cut.members} == set(tables.values())
    pd.testing.assert_frame_equal(normalized(daily.to_pandas()), sealed_rows("daily", 2))
    pd.testing.assert_frame_equal(normalized(weekly.to_pandas()), sealed_rows("weekly", 2))

    totals, at_one = example.duckdb_at_epoch(catalog, 1)
    everything = sealed_rows("daily", 2)
    assert dict(zip(totals["key"], totals["amount"].astype("int64"), strict=True)) == \
        everything.groupby("key")["amount"].sum().to_dict()
    pd.testing.assert_frame_equal(normalized(at_one), want, check_dtype=False)


def shell_env(**extra: str) -> dict[str, str]:
    # The examples call `airflow-epochs` by name, as a user whose virtualenv is active does.
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


def test_looking_at_a_pipeline_from_the_command_line(zk, zk_server, zk_chroot, tmp_path):
    ledger = EpochLedger(zk, "docs_cli", owner="docs")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    for epoch in (1, 2):
        ledger.vote(ledger.open_epoch(epoch), "orders", "ingest", {"rows": epoch})
    # The server is found as a user's `airflow-epochs zookeeper start` server is: through the state folder.
    result = subprocess.run(["bash", str(EXAMPLES / "look_at_a_pipeline.sh"), zk_server.address + zk_chroot, "docs_cli",
                             str(tmp_path)], env=shell_env(AIRFLOW_EPOCHS_HOME=str(zk_server.base)),
                             capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "frontier" in result.stdout and "epoch_sealed" in result.stdout
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<html" in (tmp_path / "timeline.html").read_text().lower()


def test_the_embedded_zookeeper_starts_answers_and_stops(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    result = subprocess.run(["bash", str(EXAMPLES / "embedded_zookeeper.sh")],
                            env=shell_env(AIRFLOW_EPOCHS_HOME=str(home)), capture_output=True, text=True, timeout=300)
    if result.returncode != 0:  # never leave a server behind
        subprocess.run([str(Path(sys.executable).parent / "airflow-epochs"), "--state-dir", str(home), "zookeeper",
                        "stop"], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ZooKeeper started at 127.0.0.1:")
    assert any(line.startswith("ZooKeeper running at 127.0.0.1:") for line in lines)
    assert lines[-1] == "ZooKeeper stopped"
