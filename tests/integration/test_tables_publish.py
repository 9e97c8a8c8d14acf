"""Publishing sealed partitions as Iceberg tables: real ZooKeeper, real PySpark, pyiceberg's SQL catalog
on a real PostgreSQL server; kill -9 of the publishing process at each step; rollback; schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tables_helpers import (
    PARTITION,
    job_for,
    new_pipeline,
    normalized,
    pg_catalog,
    seal_epoch,
    sealed_frame,
)

from airflow_epochs.coordination import EpochLedger, PartitionNotSealed
from airflow_epochs.tables import (
    EpochNotPublished,
    IncompatibleSchema,
    load_catalog,
    publish_sealed,
    read_sealed_as_of,
    table_as_of_epoch,
)
from airflow_epochs.tables import history as h

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HELPERS = Path(__file__).resolve().parents[1] / "helpers"
TABLE = "epochs.daily"


@pytest.fixture(scope="module")
def pg():
    from postgres_server import running_postgres

    with running_postgres("iceberg") as server:
        yield server


@pytest.fixture
def settings(pg, tmp_path: Path):
    return pg_catalog(pg, tmp_path / "warehouse")


def ours(table) -> list[h.PublishedSnapshot]:
    return [r for r in (h.published(s) for s in table.snapshots()) if r is not None]


def assert_one_snapshot_per_seal(ledger, table, epochs: range) -> None:
    records = [r for r in ours(table) if r.action == h.PUBLISH]
    assert [r.epoch for r in records] == list(epochs)  # exactly one each, in epoch order
    for record in records:
        seal = ledger.seal_record(record.epoch, PARTITION)
        assert seal is not None
        assert (record.pipeline, record.partition, record.attempt, record.generation, record.request) == \
            (ledger.pipeline, PARTITION, seal.attempt, seal.generation, seal.request)


def test_ten_epochs_published_once_each_and_time_travel_equals_read_sealed(zk, spark, tmp_path, settings):
    ledger = new_pipeline(zk, "ten")
    catalog = load_catalog(settings)
    main = job_for()
    for epoch in range(1, 11):
        seal_epoch(zk, spark, ledger, tmp_path / "store", epoch, main)
        outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, epoch)
        assert [r.epoch for r in outcome.published] == [epoch] and outcome.modes[epoch] == "add_files"
    table = catalog.load_table(TABLE)
    assert_one_snapshot_per_seal(ledger, table, range(1, 11))
    # Registered, not rewritten: the table's files are the ones the seals' manifests name.
    table_files = {task.file.file_path for task in table.scan().plan_files()}
    assert all("/ten/daily/epoch=" in path for path in table_files) and len(table_files) == 10
    # A repeat of every publish adds nothing.
    again = publish_sealed(ledger, catalog, TABLE, PARTITION, 10)
    assert not again.published and [r.epoch for r in again.already] == [10]
    assert len(catalog.load_table(TABLE).snapshots()) == 10
    for epoch in range(1, 11):
        want = sealed_frame(spark, ledger, epoch)
        got = normalized(table_as_of_epoch(catalog, TABLE, epoch).to_pandas())
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        via_spark = normalized(read_sealed_as_of(spark, catalog, TABLE, epoch).toPandas())
        pd.testing.assert_frame_equal(via_spark, want, check_dtype=False)
    with pytest.raises(EpochNotPublished, match="epoch 11 is not published"):
        table_as_of_epoch(catalog, TABLE, 11)


def test_unsealed_epoch_is_never_published(zk, spark, tmp_path, settings):
    ledger = new_pipeline(zk, "unsealed")
    catalog = load_catalog(settings)
    seal_epoch(zk, spark, ledger, tmp_path / "store", 1, job_for())
    ledger.open_epoch(2)  # open, nothing voted
    with pytest.raises(PartitionNotSealed, match="not sealed at epoch 2"):
        publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    table = catalog.load_table(TABLE)  # epoch 1 went in first (in order), epoch 2 did not
    assert [r.epoch for r in ours(table)] == [1]


def test_superseded_attempt_output_is_never_published(zk, spark, tmp_path, settings):
    from airflow_epochs.coordination import EpochLedger
    from airflow_epochs.spark import run_epoch
    from airflow_epochs.spark.context import EpochContext

    ledger = new_pipeline(zk, "superseded")
    catalog = load_catalog(settings)
    store = tmp_path / "store"
    first = ledger.open_epoch(1)
    # The first attempt's job writes its output (and manifest) but never votes: then a standby takes over.
    zombie = EpochContext(pipeline="superseded", partition=PARTITION, producer="job", epoch=1, attempt=first.token,
                          config_version=first.config_version, run="deadbeefdeadbeef", storage=str(store), inputs={})
    run_epoch(job_for(), spark, zombie)
    standby = EpochLedger(zk, "superseded", owner="standby")
    taken = standby.open_epoch(1, takeover=True)
    assert taken.token != first.token
    from airflow_epochs.spark import submit_and_seal

    outcome = submit_and_seal(zk, taken, PARTITION, "job", storage=str(store),
                              runner=lambda context: run_epoch(job_for(), spark, context))
    assert outcome.partition_sealed
    publish_sealed(ledger, catalog, TABLE, PARTITION, 1)
    table = catalog.load_table(TABLE)
    paths = {task.file.file_path for task in table.scan().plan_files()}
    assert paths and all(f"attempt={taken.token}" in p and "run=deadbeefdeadbeef" not in p for p in paths)
    assert [(r.epoch, r.attempt) for r in ours(table)] == [(1, taken.token)]


def run_worker(zk_server, chroot: str, settings, pipeline: str, epoch: int, kill_at: str):
    payload = json.dumps({"name": settings.name, "kind": settings.kind, "properties": dict(settings.properties),
                          "secret": dict(settings.secret)})
    return subprocess.run([sys.executable, str(HELPERS / "publish_worker.py"), zk_server.address + chroot, pipeline,
                           TABLE, PARTITION, str(epoch), kill_at], input=payload, capture_output=True, text=True,
                          timeout=180, cwd=HELPERS, env=zk_server.env())


@pytest.mark.parametrize("kill_at", ["planned", "schema", "committed"])
def test_kill_9_at_each_step_then_retry_publishes_exactly_once(zk, zk_server, zk_chroot, spark, tmp_path, settings,
                                                                kill_at):
    ledger = new_pipeline(zk, "killed")
    catalog = load_catalog(settings)
    main = job_for(note_from=3)  # epoch 3 adds a column: the "schema" step commits before the data
    for epoch in range(1, 4):
        seal_epoch(zk, spark, ledger, tmp_path / "store", epoch, main)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    killed = run_worker(zk_server, zk_chroot, settings, "killed", 3, kill_at)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert f"step {kill_at}" in killed.stdout
    table = catalog.load_table(TABLE)
    made = [r.epoch for r in ours(table)]
    assert made == ([1, 2, 3] if kill_at == "committed" else [1, 2])
    if kill_at in ("schema", "committed"):
        assert "note" in table.schema().column_names  # evolved before the kill
    # The retry (a fresh process, as the scheduler's next try) finishes the job or finds it done.
    retried = run_worker(zk_server, zk_chroot, settings, "killed", 3, "never")
    assert retried.returncode == 0, retried.stderr[-3000:]
    result = json.loads(retried.stdout.strip().splitlines()[-1])
    assert [r["epoch"] for r in result["published"]] == ([] if kill_at == "committed" else [3])
    table = catalog.load_table(TABLE)
    assert_one_snapshot_per_seal(ledger, table, range(1, 4))
    got = normalized(table_as_of_epoch(catalog, TABLE, 3).to_pandas())
    pd.testing.assert_frame_equal(got, sealed_frame(spark, ledger, 3), check_dtype=False)
    assert got.loc[got.epoch == 3, "note"].eq("e3").all() and got.loc[got.epoch < 3, "note"].isna().all()


def test_rollback_leaves_the_table_as_at_k_and_republish_follows(zk, spark, tmp_path, settings):
    ledger = new_pipeline(zk, "rolled")
    catalog = load_catalog(settings)
    store = tmp_path / "store"
    first = job_for()
    for epoch in range(1, 6):
        seal_epoch(zk, spark, ledger, store, epoch, first)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 5)
    at_three = normalized(table_as_of_epoch(catalog, TABLE, 3).to_pandas())
    superseded = h.snapshot_of_epoch(catalog.load_table(TABLE), 5).snapshot_id
    superseded_rows = normalized(table_as_of_epoch(catalog, TABLE, 5).to_pandas())
    ledger.rollback(3, reason="reprocess 4 and 5", request_id="rollback-test-1")
    # Publishing epoch 3 again mirrors the rollback first: one snapshot removing epochs 4 and 5.
    outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, 3)
    assert outcome.rolled_back is not None and outcome.rolled_back.epoch == 3 and not outcome.published
    table = catalog.load_table(TABLE)
    props = h.summary_properties(table.current_snapshot())
    assert props[h.ACTION] == h.ROLLBACK and props[h.REMOVED_EPOCHS] == "4,5"
    # The mirror records the ledger rollback's own request id.
    event = next(e for e in reversed(ledger.history()) if e.event == "rollback")
    assert event.record.request == "rollback-test-1"
    assert props[h.REQUEST] == "rollback-test-1" and props[h.ROLLBACK_TO] == "3"
    now = normalized(table.scan().to_arrow().to_pandas())
    pd.testing.assert_frame_equal(now, at_three, check_dtype=False)
    with pytest.raises(EpochNotPublished):
        table_as_of_epoch(catalog, TABLE, 4)
    # A repeat of the mirror does nothing.
    assert publish_sealed(ledger, catalog, TABLE, PARTITION, 3).rolled_back is None
    # Epochs 4 and 5 run again (a new generation) and are published after the rollback snapshot. The
    # re-seal's garbage collection keeps the published runs of the rolled-back generation (marked
    # _PUBLISHED) and still deletes a run no snapshot names.
    stray = store / "rolled" / PARTITION / "epoch=4" / "attempt=999" / "run=stray"
    stray.mkdir(parents=True)
    for epoch in (4, 5):
        seal_epoch(zk, spark, ledger, store, epoch, first)
    assert not stray.parent.exists()
    publish_sealed(ledger, catalog, TABLE, PARTITION, 5)
    table = catalog.load_table(TABLE)
    actions = [(r.action, r.epoch) for r in ours(table)]
    assert actions == [("publish", 1), ("publish", 2), ("publish", 3), ("publish", 4), ("publish", 5),
                       ("rollback", 3), ("publish", 4), ("publish", 5)]
    live = h.live_epochs(table)
    assert sorted(live) == [1, 2, 3, 4, 5]
    for epoch in (4, 5):
        assert live[epoch].generation == ledger.seal_record(epoch, PARTITION).generation
        assert live[epoch].generation != ours(table)[epoch - 1].generation
    got = normalized(table_as_of_epoch(catalog, TABLE, 5).to_pandas())
    pd.testing.assert_frame_equal(got, sealed_frame(spark, ledger, 5), check_dtype=False)
    # Time travel to the superseded snapshot of epoch 5 still finds its files.
    old = normalized(table.scan(snapshot_id=superseded).to_arrow().to_pandas())
    pd.testing.assert_frame_equal(old, superseded_rows, check_dtype=False)


def test_incompatible_column_is_refused_before_any_commit(zk, spark, tmp_path, settings):
    ledger = new_pipeline(zk, "schema")
    catalog = load_catalog(settings)
    main = job_for(amount_as_text_at=2)
    for epoch in (1, 2):
        seal_epoch(zk, spark, ledger, tmp_path / "store", epoch, main)
    publish_sealed(ledger, catalog, TABLE, PARTITION, 1)
    before = catalog.load_table(TABLE)
    with pytest.raises(IncompatibleSchema, match="column 'amount' is string in the sealed files but int64"):
        publish_sealed(ledger, catalog, TABLE, PARTITION, 2)
    after = catalog.load_table(TABLE)
    assert after.metadata_location == before.metadata_location  # not even a schema change


def test_table_of_another_partition_and_bad_names_are_refused(zk, spark, tmp_path, settings):
    from airflow_epochs.coordination import InvalidInput
    from airflow_epochs.tables import TableOfAnotherPartition

    ledger = new_pipeline(zk, "owner")
    catalog = load_catalog(settings)
    seal_epoch(zk, spark, ledger, tmp_path / "store", 1, job_for())
    publish_sealed(ledger, catalog, TABLE, PARTITION, 1)
    other = new_pipeline(zk, "intruder")
    seal_epoch(zk, spark, other, tmp_path / "store", 1, job_for())
    with pytest.raises(TableOfAnotherPartition, match="holds partition 'daily' of pipeline 'owner'"):
        publish_sealed(other, catalog, TABLE, PARTITION, 1)
    with pytest.raises(InvalidInput, match=r"'namespace\.table'"):
        publish_sealed(ledger, catalog, "no-dots; drop", PARTITION, 1)
    assert [r.epoch for r in ours(catalog.load_table(TABLE))] == [1]


def test_garbage_collection_keeps_runs_a_published_snapshot_names(tmp_path):
    from airflow_epochs.spark.storage import PUBLISHED_MARKER, collect_garbage, mark_published, run_location

    store = str(tmp_path / "store")
    sealed, published, stray = (run_location(store, "gc", PARTITION, 3, attempt, run)
                                for attempt, run in ((9, "new"), (7, "old"), (8, "failed")))
    for run in (sealed, published, stray):
        Path(run, "data").mkdir(parents=True)
        Path(run, "data", "part-0.parquet").write_bytes(b"x")
    mark_published(published, {"table": TABLE, "epoch": 3})
    assert json.loads(Path(published, PUBLISHED_MARKER).read_text())["table"] == TABLE
    removed = collect_garbage(store, "gc", PARTITION, 3, [sealed])
    assert removed == [stray]
    assert Path(sealed, "data", "part-0.parquet").exists() and Path(published, "data", "part-0.parquet").exists()
    assert not Path(stray).parent.exists()  # its attempt folder went with its only run



def _hand_sealed(zk, name: str, location: str, data_dir: Path):
    """A pipeline whose epoch 1 is sealed by a hand-written manifest naming ``location`` (one Parquet
    file in ``data_dir``, where it resolves): what anyone who can write to ZooKeeper could have voted."""
    ledger = new_pipeline(zk, name)
    _vote_by_hand(ledger, ledger.open_epoch(1), location, data_dir)
    return ledger


def _vote_by_hand(ledger, attempt, location: str, data_dir: Path) -> None:
    """Seal the attempt's epoch with a manifest naming ``location``; its one Parquet file is in ``data_dir``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    Path(data_dir, "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"key": ["ams", "bcn"], "amount": [1, 2]}), Path(data_dir, "data", "part-0.parquet"))
    manifest = {"epoch": attempt.epoch, "attempt": attempt.token, "run": "r1", "location": location,
                "outputs": {"data": {"path": f"{location}/data", "format": "parquet", "rows": 2, "checksum": "c",
                                     "files": 1}}}
    assert ledger.vote(attempt, PARTITION, "job", manifest).partition_sealed


def test_a_run_folder_outside_the_storage_root_is_refused_before_any_write(zk, tmp_path, settings):
    from airflow_epochs.spark.run_paths import OutsideRunFolder
    from airflow_epochs.spark.storage import PUBLISHED_MARKER, run_location
    from airflow_epochs.tables import RunOutsideStorage

    catalog = load_catalog(settings)
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "linked").mkdir(parents=True)
    (outside / "linked").mkdir(parents=True)
    (store / "linked" / PARTITION).symlink_to(outside / "linked")
    climbs = outside / "climbs" / PARTITION / "epoch=1" / "attempt=1" / "run=r1"
    cases = {  # pipeline: (the location the manifest names, where it resolves)
        # the seal's run folder by its layout, but under another root than the pipeline's storage
        "elsewhere": (run_location(str(outside), "elsewhere", PARTITION, 1, 1, "r1"),
                      outside / "elsewhere" / PARTITION / "epoch=1" / "attempt=1" / "run=r1"),
        # inside the root by its text, but a folder on the way is a link to elsewhere
        "linked": (run_location(str(store), "linked", PARTITION, 1, 1, "r1"),
                   outside / "linked" / "epoch=1" / "attempt=1" / "run=r1"),
        # climbs out of the storage root once pyarrow has percent-decoded the URI
        "climbs": ((store / "x").as_uri() + "/%2e%2e/%252e%252e/outside/climbs/daily/epoch=1/attempt=1/run=r1",
                   climbs),
        # not a run folder at all: the marker would land in any folder the manifest names
        "anyfolder": (str(outside / "victim"), outside / "victim"),
    }
    for name, (location, data_dir) in cases.items():
        ledger = _hand_sealed(zk, name, location, data_dir)
        # Refused when the seal is read (not the seal's run folder, or not canonical) or before the marker.
        with pytest.raises((RunOutsideStorage, OutsideRunFolder), match=r"nothing was (written|read)"):
            publish_sealed(ledger, catalog, f"epochs.{name}", PARTITION, 1, storage=str(store))
        assert not Path(data_dir, PUBLISHED_MARKER).exists()
        assert not catalog.table_exists(f"epochs.{name}")
    # Without the storage root the layout still holds: a folder that is not a run folder is refused.
    with pytest.raises(OutsideRunFolder, match="as its run folder"):
        publish_sealed(EpochLedger(zk, "anyfolder", owner="tests"), catalog, "epochs.anyfolder", PARTITION, 1)
    assert not Path(outside / "victim", PUBLISHED_MARKER).exists()
    # The seal's own run folder under the root is published and marked.
    inside = run_location(str(store), "inside", PARTITION, 1, 1, "r1")
    ledger = _hand_sealed(zk, "inside", inside, Path(inside))
    assert publish_sealed(ledger, catalog, "epochs.inside", PARTITION, 1, storage=str(store)).snapshot_of(1)
    assert json.loads(Path(inside, PUBLISHED_MARKER).read_text())["table"] == "epochs.inside"


def test_runs_published_before_the_marker_existed_are_kept_by_garbage_collection(zk, tmp_path, settings):
    """A table whose snapshots were published before the marker existed (no marker, no
    ``epochs.run-markers`` property). The ledger rolls back to 1 and seals 2 again: the next publish
    marks the older snapshots' run folders first, then mirrors the rollback and publishes the new 2,
    so garbage collection of epoch 2 keeps the rolled-back run the table's history still names."""
    from airflow_epochs.spark.storage import PUBLISHED_MARKER, collect_garbage, run_location
    from airflow_epochs.tables.run_markers import RUN_MARKERS

    catalog = load_catalog(settings)
    store = tmp_path / "store"
    ledger = new_pipeline(zk, "legacy")

    def seal_by_hand(epoch: int, run: str) -> str:
        attempt = ledger.open_epoch(epoch)
        location = run_location(str(store), "legacy", PARTITION, epoch, attempt.token, run)
        _vote_by_hand(ledger, attempt, location, Path(location))
        return location

    old = {epoch: seal_by_hand(epoch, "r1") for epoch in (1, 2)}
    publish_sealed(ledger, catalog, "epochs.legacy", PARTITION, 2, storage=str(store))
    for location in old.values():  # as published before the marker existed
        Path(location, PUBLISHED_MARKER).unlink()
    with catalog.load_table("epochs.legacy").transaction() as txn:
        txn.remove_properties(RUN_MARKERS)
    before_rollback = h.snapshot_of_epoch(catalog.load_table("epochs.legacy"), 2).snapshot_id

    ledger.rollback(1, reason="epoch 2 again")
    new = seal_by_hand(2, "r2")
    outcome = publish_sealed(ledger, catalog, "epochs.legacy", PARTITION, 2, storage=str(store))
    assert outcome.rolled_back is not None and [r.epoch for r in outcome.published] == [2]
    for epoch, location in old.items():
        assert json.loads(Path(location, PUBLISHED_MARKER).read_text())["epoch"] == epoch
    assert catalog.load_table("epochs.legacy").properties[RUN_MARKERS] == "1"
    assert collect_garbage(str(store), "legacy", PARTITION, 2, [new]) == []
    assert Path(old[2], "data", "part-0.parquet").exists()
    # time travel to the snapshot the rollback superseded still reads its files
    assert catalog.load_table("epochs.legacy").scan(snapshot_id=before_rollback).to_arrow().num_rows == 4
