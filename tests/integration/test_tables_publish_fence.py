"""What keeps a publish exactly once when something else happens to the table or the ledger mid-way:
a rollback landing between the seal check and the commit, a writer that beats our commit with the same
seal, a table broken by an earlier double commit. Real ZooKeeper, pyiceberg's SQL catalog on SQLite,
DuckDB reading the result; seals voted by hand (no Spark needed for what is tested here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables_helpers import PARTITION, new_pipeline

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.spark.storage import run_location
from airflow_epochs.tables import (
    EpochNotPublished,
    RolledBackWhilePublishing,
    TableBroken,
    catalog_settings,
    load_catalog,
    publish_sealed,
    table_as_of_epoch,
    table_problems,
)
from airflow_epochs.tables import history as h
from airflow_epochs.tables.duckdb_reader import matches_sealed
from airflow_epochs.tables.seal_files import seal_to_publish

pytestmark = [pytest.mark.integration]
TABLE = "epochs.fenced"


@pytest.fixture
def settings(tmp_path: Path):
    return catalog_settings(extra={"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"),
                                   "warehouse": (tmp_path / "warehouse").as_uri()})


def seal_by_hand(ledger: EpochLedger, store: Path, epoch: int, run: str = "r1") -> None:
    """Open ``epoch``, write its one Parquet file where the layout puts it, vote a manifest naming it."""
    attempt = ledger.open_epoch(epoch)
    location = run_location(str(store), ledger.pipeline, PARTITION, epoch, attempt.token, run)
    Path(location, "data").mkdir(parents=True)
    rows = {"key": ["ams", "bcn"], "amount": [epoch * 10, epoch * 10 + 1], "epoch": [epoch, epoch]}
    pq.write_table(pa.table(rows), Path(location, "data", "part-0.parquet"))
    manifest = {"epoch": epoch, "attempt": attempt.token, "run": run, "location": location,
                "outputs": {"data": {"path": f"{location}/data", "format": "parquet", "rows": 2, "checksum": "c",
                                     "files": 1}}}
    assert ledger.vote(attempt, PARTITION, "job", manifest).epoch_sealed


def ours(table) -> list[tuple[str, int]]:
    """(action, epoch) of our snapshots on the current line, oldest first."""
    return [(r.action, r.epoch) for r in reversed([h.published(s) for s in h.ancestry(table)]) if r is not None]


def test_a_rollback_between_the_seal_check_and_the_commit_is_undone_before_the_publish_answers(zk, tmp_path,
                                                                                              settings):
    ledger = new_pipeline(zk, "fenced")
    operator = EpochLedger(zk, "fenced", owner="operator")  # another owner rolls back
    catalog = load_catalog(settings)
    store = tmp_path / "store"
    for epoch in (1, 2, 3):
        seal_by_hand(ledger, store, epoch)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    landed = []

    def rollback_after_the_check(step: str) -> None:
        # "planned": epoch 3's seal was read and its files checked; its commit comes next
        if step == "planned" and not landed:
            landed.append(operator.rollback(2, reason="bad epoch 3"))

    with pytest.raises(RolledBackWhilePublishing, match=r"epoch\(s\) \[3\].*set back to epoch 2"):
        publish_sealed(ledger, catalog, TABLE, PARTITION, 3, on_step=rollback_after_the_check)
    assert landed == [[3]]
    table = catalog.load_table(TABLE)
    # epoch 3 was committed (the check passed before the rollback), then undone in the same lock hold
    assert ours(table) == [("publish", 1), ("publish", 2), ("publish", 3), ("rollback", 2)]
    assert list(h.live_epochs(table)) == [1, 2]
    with pytest.raises(EpochNotPublished):
        table_as_of_epoch(catalog, TABLE, 3)
    assert sorted(table.scan().to_arrow().column("epoch").to_pylist()) == [1, 1, 2, 2]
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 2)[0]
    # the epoch sealed again by a new attempt is published once, on top
    seal_by_hand(ledger, store, 3, run="r2")
    outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, 3)
    assert [r.epoch for r in outcome.published] == [3]
    table = catalog.load_table(TABLE)
    assert list(h.live_epochs(table)) == [1, 2, 3] and table_problems(table, files=True) == []
    assert h.live_epochs(table)[3].attempt == ledger.seal_record(3, PARTITION).attempt
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 3)[0]


def _commit_like_a_publisher(catalog, ledger: EpochLedger, epoch: int, *, check_duplicates: bool = True) -> None:
    """Commit ``epoch``'s seal into the table as our publisher would, without its lock (a publisher
    whose ZooKeeper session expired while it held the lock, or a double commit of old)."""
    seal = seal_to_publish(ledger, PARTITION, epoch)
    properties = {h.PIPELINE: ledger.pipeline, h.PARTITION: PARTITION, h.ACTION: h.PUBLISH, h.EPOCH: str(epoch),
                  h.ATTEMPT: str(seal.attempt), h.GENERATION: str(seal.generation), h.REQUEST: seal.request,
                  h.MODE: "add_files"}
    catalog.load_table(TABLE).add_files(list(seal.files), snapshot_properties=properties,
                                        check_duplicate_files=check_duplicates)


def test_a_commit_refused_for_a_concurrent_update_answers_with_the_winners_snapshot(zk, tmp_path, settings):
    """pyiceberg would retry our refused commit by itself and append the epoch a second time; with its
    retry off the refusal reaches the publisher, which finds the winner's snapshot of this seal."""
    ledger = new_pipeline(zk, "beaten")
    catalog = load_catalog(settings)
    rival = load_catalog(settings)
    store = tmp_path / "store"
    for epoch in (1, 2):
        seal_by_hand(ledger, store, epoch)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 1)
    beaten = []

    def rival_commits_first(step: str) -> None:
        if step == "planned" and not beaten:
            _commit_like_a_publisher(rival, ledger, 2)
            beaten.append(catalog.load_table(TABLE).current_snapshot().snapshot_id)

    outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, 2, on_step=rival_commits_first)
    assert [(r.epoch, r.snapshot_id) for r in outcome.published] == [(2, beaten[0])]  # the winner's, as ours
    table = catalog.load_table(TABLE)
    assert ours(table) == [("publish", 1), ("publish", 2)] and len(table.snapshots()) == 2
    assert table_problems(table, files=True) == []
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 2)[0]


def test_a_table_broken_by_a_double_commit_is_refused_with_what_to_do_and_the_repair_works(zk, tmp_path, settings):
    ledger = new_pipeline(zk, "broken")
    catalog = load_catalog(settings)
    store = tmp_path / "store"
    for epoch in (1, 2, 3):
        seal_by_hand(ledger, store, epoch)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    good = catalog.load_table(TABLE).current_snapshot().snapshot_id
    _commit_like_a_publisher(catalog, ledger, 2, check_duplicates=False)  # what pyiceberg's retry did
    broken = catalog.load_table(TABLE)
    assert [p.what.split(" (")[0] for p in table_problems(broken, files=True)] == \
        ["epoch 2 is committed twice", "1 data file(s) are registered twice in the current snapshot"]
    with pytest.raises(TableBroken, match=rf"epoch 2 is committed twice.*set_current_snapshot\({good}\)"):
        publish_sealed(ledger, catalog, TABLE, PARTITION, 3)
    assert len(catalog.load_table(TABLE).snapshots()) == 3  # nothing written
    cli = [str(Path(sys.executable).parent / "airflow-epochs"), "table", "check", TABLE,
           "--sqlite", settings.properties["uri"].removeprefix("sqlite:///"),
           "--warehouse", settings.properties["warehouse"]]
    checked = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1, checked.stderr[-2000:]
    assert "BROKEN: epoch 2 is committed twice" in checked.stdout and f"set_current_snapshot({good})" in checked.stdout
    # the repair the message gives, then a publish: each epoch once
    broken.manage_snapshots().set_current_snapshot(good).commit()
    outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, 3)
    assert [r.epoch for r in outcome.published] == [3]
    table = catalog.load_table(TABLE)
    assert ours(table) == [("publish", 1), ("publish", 2), ("publish", 3)] and table_problems(table, files=True) == []
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 3)[0]
    assert subprocess.run(cli, capture_output=True, text=True, timeout=120).returncode == 0


def test_a_name_mapping_without_a_column_is_refused_with_what_to_do(zk, tmp_path, settings):
    import json

    from pyiceberg.table.name_mapping import create_mapping_from_schema

    ledger = new_pipeline(zk, "unmapped")
    catalog = load_catalog(settings)
    store = tmp_path / "store"
    for epoch in (1, 2):
        seal_by_hand(ledger, store, epoch)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 1)
    table = catalog.load_table(TABLE)
    mapping = json.loads(table.properties["schema.name-mapping.default"])
    with table.transaction() as txn:  # what a stale retry left: a mapping without a column
        txn.set_properties({"schema.name-mapping.default": json.dumps([m for m in mapping if m["names"] != ["key"]])})
    with pytest.raises(TableBroken, match=r"no entry for column\(s\) \['key'\].*create_mapping_from_schema"):
        publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    table = catalog.load_table(TABLE)
    remapped = create_mapping_from_schema(table.schema()).model_dump_json()
    with table.transaction() as txn:
        txn.set_properties({"schema.name-mapping.default": remapped})
    assert [r.epoch for r in publish_sealed(ledger, catalog, TABLE, PARTITION, 2).published] == [2]
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 2)[0]
