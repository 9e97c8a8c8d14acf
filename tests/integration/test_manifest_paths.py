"""Every path a seal's manifest names must lie inside its run folder before anything reads, publishes
or deletes it (issue 35, item 8: a vote whose ``outputs.data.path`` pointed at a root-only folder had
that Parquet file published into the Iceberg table). Real ZooKeeper, pyiceberg's SQL catalog on SQLite;
the forged votes are what anyone who may write to ZooKeeper could vote."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables_helpers import PARTITION, new_pipeline

from airflow_epochs.spark import sealed_outputs, sealed_runs
from airflow_epochs.spark.run_paths import OutsideRunFolder, check_manifest_outputs, check_snapshot_pointer
from airflow_epochs.spark.storage import PUBLISHED_MARKER, collect_garbage, run_location
from airflow_epochs.tables import catalog_settings, load_catalog, publish_sealed

pytestmark = pytest.mark.integration


def _secret_folder(top: Path) -> Path:
    """A folder only its owner may read, holding a Parquet file (the attack's target)."""
    secret = top / "root-only"
    (secret / "data").mkdir(parents=True)
    pq.write_table(pa.table({"key": ["pin"], "amount": [1234]}), secret / "data" / "part-0.parquet")
    os.chmod(secret, 0o700)
    return secret


def _forged_seal(zk, name: str, location: str, path: str):
    ledger = new_pipeline(zk, name)
    attempt = ledger.open_epoch(1)
    manifest = {"epoch": 1, "attempt": attempt.token, "run": "r1", "location": location,
                "outputs": {"data": {"path": path, "format": "parquet", "rows": 1, "checksum": "c", "files": 1}}}
    assert ledger.vote(attempt, PARTITION, "job", manifest).partition_sealed
    return ledger, attempt.token


def test_a_manifest_naming_a_path_outside_its_run_folder_is_refused_by_readers_publish_and_gc(zk, tmp_path):
    store = tmp_path / "store"
    secret = _secret_folder(tmp_path)
    catalog = load_catalog(catalog_settings(extra={"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"),
                                                   "warehouse": (tmp_path / "warehouse").as_uri()}))
    def run(name: str, run_id: str = "r1") -> str:
        return run_location(str(store), name, PARTITION, 1, 1, run_id)

    cases = {  # pipeline: (the manifest's run folder, its output path)
        "outside": (run("outside"), str(secret / "data")),
        "climbs": (run("climbs"), run("climbs") + "/../../../../../../root-only/data"),
        "encoded": (run("encoded"), run("encoded") + "/%2e%2e/%2e%2e/root-only/data"),
        "uri": (run("uri"), (secret / "data").as_uri()),
        "location": (str(secret), str(secret / "data")),  # the run folder itself is the secret folder
        "sibling": (run("sibling"), run("sibling", "r2") + "/data"),
    }
    before = sorted(p.name for p in secret.rglob("*"))
    for name, (location, path) in cases.items():
        if location.startswith(str(store)):
            Path(location).mkdir(parents=True, exist_ok=True)
        ledger, _ = _forged_seal(zk, name, location, path)
        with pytest.raises(OutsideRunFolder, match=r"nothing was read|not canonical|run folder") as refused:
            sealed_outputs(ledger, PARTITION, [1])
        assert name != "outside" or str(secret / "data") in str(refused.value)  # names the value
        with pytest.raises(OutsideRunFolder):
            publish_sealed(ledger, catalog, f"epochs.{name}", PARTITION, 1, storage=str(store))
        assert not catalog.table_exists(f"epochs.{name}")
        if name == "location":
            with pytest.raises(OutsideRunFolder):  # garbage collection would keep whatever it names
                collect_garbage(str(store), name, PARTITION, 1, sealed_runs(ledger, PARTITION, 1))
    assert sorted(p.name for p in secret.rglob("*")) == before and not (secret / PUBLISHED_MARKER).exists()


def test_the_seals_own_output_is_read_and_published(zk, tmp_path):
    store = tmp_path / "store"
    run = run_location(str(store), "fine", PARTITION, 1, 1, "r1")
    (Path(run) / "data").mkdir(parents=True)
    pq.write_table(pa.table({"key": ["a"], "amount": [1]}), Path(run) / "data" / "part-0.parquet")
    ledger, _ = _forged_seal(zk, "fine", run, f"{run}/data")
    [item] = sealed_outputs(ledger, PARTITION, [1])
    assert (item.location, item.path) == (run, f"{run}/data")
    catalog = load_catalog(catalog_settings(extra={"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"),
                                                   "warehouse": (tmp_path / "warehouse").as_uri()}))
    assert publish_sealed(ledger, catalog, "epochs.fine", PARTITION, 1, storage=str(store)).snapshot_of(1)


def test_a_jobs_manifest_and_a_snapshot_pointer_are_checked_before_they_are_voted_or_read(tmp_path):
    from airflow_epochs.coordination.wire.manifests import RunManifest

    def record(doc):
        return RunManifest.from_json({"epoch": 2, "attempt": 5, "run": "r1", **doc}, where="test")

    run = run_location(str(tmp_path), "p", "x", 2, 5, "r1")
    check_manifest_outputs(run, record({"location": run, "outputs": {"data": {"path": f"{run}/data"}}}))
    for manifest in ({"location": run, "outputs": {"data": {"path": "/etc"}}},
                     {"location": "/etc", "outputs": {}},
                     {"location": run, "outputs": {"snapshot": {"path": f"{run}/../r2/snapshot"}}}):
        with pytest.raises(OutsideRunFolder):
            check_manifest_outputs(run, record(manifest))
    previous = run_location(str(tmp_path), "p", "x", 1, 3, "r0")
    check_snapshot_pointer(str(tmp_path), "p", "x", {"path": f"{previous}/snapshot", "epoch": 1})
    for pointer in ({"path": "/etc/snapshot", "epoch": 1}, {"path": f"{previous}/snapshot", "epoch": 2},
                    {"path": f"{previous}/snapshot#", "epoch": 1}, {"path": previous, "epoch": 1},
                    {"path": run_location(str(tmp_path), "q", "x", 1, 3, "r0") + "/snapshot", "epoch": 1}):
        with pytest.raises(OutsideRunFolder):
            check_snapshot_pointer(str(tmp_path), "p", "x", pointer)
