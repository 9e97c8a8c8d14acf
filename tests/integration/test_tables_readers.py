"""Other readers of a published table: DuckDB (its Iceberg extension from the pip packages, loaded
offline) and the ``airflow-epochs table`` command, each giving the figures ``read_sealed`` gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tables_helpers import PARTITION, job_for, new_pipeline, normalized, seal_epoch, sealed_frame

from airflow_epochs.tables import catalog_settings, load_catalog, publish_sealed, snapshot_id_of_epoch

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TABLE = "epochs.daily"


@pytest.fixture
def published(zk, spark, tmp_path: Path):
    """Four epochs sealed on Spark and published to a SQLite catalog (the demo's kind)."""
    settings = catalog_settings(extra={"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"),
                                       "warehouse": (tmp_path / "warehouse").as_uri()})
    catalog = load_catalog(settings)
    ledger = new_pipeline(zk, "readers")
    main = job_for()
    for epoch in range(1, 5):
        seal_epoch(zk, spark, ledger, tmp_path / "store", epoch, main)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 4)
    return ledger, catalog, tmp_path


def test_duckdb_reads_the_published_table_with_read_sealed_figures(spark, published):
    from airflow_epochs.tables.duckdb_reader import connect, scan_sql

    ledger, catalog, _ = published
    table = catalog.load_table(TABLE)
    duck = connect()
    figures = "SELECT key, sum(events) AS events, sum(amount) AS amount FROM {} GROUP BY key ORDER BY key"
    got = duck.execute(figures.format(scan_sql(table.metadata_location))).df()
    want = sealed_frame(spark, ledger, 4).groupby("key", as_index=False)[["events", "amount"]].sum()
    pd.testing.assert_frame_equal(got.astype({"events": "int64", "amount": "int64"}), want, check_dtype=False)
    # Time travel in DuckDB: the snapshot of epoch 2 holds epochs 1 and 2 only.
    at_two = duck.execute(f"SELECT * FROM {scan_sql(table.metadata_location, snapshot_id_of_epoch(catalog, TABLE, 2))}"
                          ).df()
    pd.testing.assert_frame_equal(normalized(at_two), sealed_frame(spark, ledger, 2), check_dtype=False)
    # Nothing was fetched: the extensions came from the packages' files.
    loaded = duck.execute("SELECT extension_name, install_path FROM duckdb_extensions() WHERE loaded").fetchall()
    assert {name for name, _ in loaded} >= {"iceberg", "avro"}


def test_table_command_reads_as_of_an_epoch(spark, published):
    ledger, _, folder = published
    cli = [str(Path(sys.executable).parent / "airflow-epochs"), "table"]
    where = ["--sqlite", str(folder / "catalog.db"), "--warehouse", (folder / "warehouse").as_uri()]
    read = subprocess.run([*cli, "read", TABLE, "--as-of-epoch", "3", "--format", "json", *where],
                          capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    got = normalized(pd.DataFrame([json.loads(line) for line in read.stdout.splitlines()]))
    pd.testing.assert_frame_equal(got, sealed_frame(spark, ledger, 3), check_dtype=False)
    assert "as of epoch 3: snapshot" in read.stderr
    listed = subprocess.run([*cli, "epochs", TABLE, "--format", "json", *where], capture_output=True, text=True,
                            timeout=120)
    assert [json.loads(line)["epoch"] for line in listed.stdout.splitlines()] == [1, 2, 3, 4]
    missing = subprocess.run([*cli, "read", TABLE, "--as-of-epoch", "9", *where], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and "epoch 9 is not published" in missing.stderr
    assert "Traceback" not in missing.stderr
