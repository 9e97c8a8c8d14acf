"""PublishSealedOperator's storage root in real DAG runs (``dag.test()``) against a real ZooKeeper and an
Iceberg SQL catalog: a manifest's run folder outside the storage root is refused before anything is
written (no marker, no table), and a run folder under it is published and marked."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.spark.storage import PUBLISHED_MARKER, run_location
from airflow_epochs.tables import catalog_settings, load_catalog

pytestmark = [pytest.mark.integration]

PIPELINE, PARTITION, TABLE = "in_storage", "daily", "epochs.in_storage"


@pytest.fixture
def catalog_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    extra = {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "warehouse").as_uri(),
             "name": "in_storage_test"}
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_TEST", json.dumps({"conn_type": "iceberg", "extra": extra}))
    return extra


def _run_folder(root: Path) -> str:
    """The first attempt's run folder of epoch 1 under ``root``, with one Parquet file in its output."""
    location = run_location(str(root), PIPELINE, PARTITION, 1, 1, "r1")
    Path(location, "data").mkdir(parents=True)
    pq.write_table(pa.table({"key": ["ams", "bcn"], "amount": [1, 2]}), Path(location, "data", "part-0.parquet"))
    return location


def _states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_a_run_folder_outside_the_storage_root_is_refused_before_any_write(dagbag, zk_connection, zk, tmp_path,
                                                                           catalog_extra):
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir()
    # the seal's run folder by the layout (so the layout check alone lets it through), under another root
    location = _run_folder(outside)
    run = dagbag.get_dag("test_publish_in_storage").test(
        run_conf={"epoch": 1, "location": location, "storage": str(store), "table": TABLE})
    assert "failed" in str(run.state)
    states = _states(run)
    assert "success" in states["epoch.vote"] and "failed" in states["epoch.publish"], states
    assert EpochLedger(zk, PIPELINE).seal(1, PARTITION).attempt == 1  # sealed, and at the folder's attempt
    assert not Path(location, PUBLISHED_MARKER).exists()
    assert not load_catalog(catalog_settings(extra=catalog_extra)).table_exists(TABLE)


def test_a_run_folder_under_the_storage_root_is_published(dagbag, zk_connection, zk, tmp_path, catalog_extra):
    store = tmp_path / "store"
    location = _run_folder(store)
    run = dagbag.get_dag("test_publish_in_storage").test(
        run_conf={"epoch": 1, "location": location, "storage": str(store), "table": TABLE})
    assert "success" in str(run.state), _states(run)
    assert json.loads(Path(location, PUBLISHED_MARKER).read_text())["table"] == TABLE
    table = load_catalog(catalog_settings(extra=catalog_extra)).load_table(TABLE)
    assert sorted(table.scan().to_arrow().column("key").to_pylist()) == ["ams", "bcn"]

