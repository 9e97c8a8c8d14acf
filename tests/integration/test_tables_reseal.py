"""Publishing re-seals into an Iceberg table: real ZooKeeper, pyiceberg's SQL catalog on SQLite, real
PySpark for ``read_sealed``. A re-seal of epoch 2 of 4 gives one corrective snapshot (the epoch's files
replaced in one commit) naming the epoch, the version and the correction; the table then equals the newest
versions, the older version stays readable by time travel, and two publishers racing (with the publish
lock, and without it so the catalog refuses one commit) still give one corrective snapshot."""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables_helpers import PARTITION, PRODUCER, events, new_pipeline, normalized, sealed_frame

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.spark import read_sealed
from airflow_epochs.spark.storage import run_location
from airflow_epochs.tables import (
    EpochNotPublished,
    catalog_settings,
    load_catalog,
    publish_sealed,
    table_as_of_epoch,
    table_problems,
)
from airflow_epochs.tables import history as h
from airflow_epochs.tables.reseal_publish import ResealPublisher

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TABLE = "epochs.daily"
CORRECTION = 1000  # added to every amount of the re-produced epoch


def write_run(ledger: EpochLedger, store: Path, epoch: int, attempt: int, run: str, *, extra: int = 0) -> dict:
    """One Parquet file of the epoch's per-key figures in run folder ``run`` of ``attempt``; its manifest."""
    location = run_location(str(store), ledger.pipeline, PARTITION, epoch, attempt, run)
    figures: dict[str, list[int]] = {}
    for key, amount in events(epoch):
        figures.setdefault(key, []).append(amount + extra)
    keys = sorted(figures)
    Path(location, "data").mkdir(parents=True)
    pq.write_table(pa.table({"key": keys, "events": [len(figures[k]) for k in keys],
                             "amount": [sum(figures[k]) for k in keys], "epoch": [epoch] * len(keys)}),
                   Path(location, "data", "part-0.parquet"))
    return {"epoch": epoch, "attempt": attempt, "run": run, "location": location,
            "outputs": {"data": {"path": f"{location}/data", "format": "parquet", "rows": len(keys),
                                 "checksum": "c", "files": 1}}}


def seal_four_and_publish(ledger: EpochLedger, store: Path, catalog) -> None:
    for epoch in range(1, 5):
        attempt = ledger.open_epoch(epoch)
        manifest = write_run(ledger, store, epoch, attempt.token, "r1")
        assert ledger.vote(attempt, PARTITION, PRODUCER, manifest).epoch_sealed
    assert [r.epoch for r in publish_sealed(ledger, catalog, TABLE, PARTITION, 4).published] == [1, 2, 3, 4]


def reseal_epoch_two(ledger: EpochLedger, store: Path, request_id: str) -> None:
    """Version 2 of epoch 2: every amount corrected, written to a new run folder of the sealing attempt."""
    opened = ledger.corrections.reseal(2, PARTITION, reason="late correction of day 2", request_id=request_id)
    attempt = ledger.seal_record(2, PARTITION).attempt
    manifest = write_run(ledger, store, 2, attempt, "r2", extra=CORRECTION)
    assert ledger.corrections.vote_version(2, PARTITION, opened.version, PRODUCER, manifest).sealed


def sqlite_catalog(folder: Path, name: str = "reseal"):
    return load_catalog(catalog_settings(extra={"catalog": "sql", "sqlite": str(folder / "catalog.db"),
                                                "warehouse": (folder / "warehouse").as_uri(), "name": name}))


def corrective(table) -> list[h.PublishedSnapshot]:
    return [r for r in (h.published(s) for s in table.snapshots()) if r is not None and r.action == h.RESEAL]


def test_reseal_is_one_corrective_snapshot_and_the_old_version_stays_readable(zk, spark, tmp_path):
    ledger = new_pipeline(zk, "corrected")
    store = tmp_path / "store"
    catalog = sqlite_catalog(tmp_path)
    seal_four_and_publish(ledger, store, catalog)
    before = len(catalog.load_table(TABLE).snapshots())
    # [START reseal_publish]
    reseal_epoch_two(ledger, store, request_id="fix-day-2")
    outcome = publish_sealed(ledger, catalog, TABLE, PARTITION, 4)  # any publish applies pending re-seals
    (record,) = outcome.resealed
    assert (record.action, record.epoch, record.version) == ("reseal", 2, 2)
    # The newest versions, as read_sealed reads them; the old version by time travel.
    newest = table_as_of_epoch(catalog, TABLE, 4)
    original = table_as_of_epoch(catalog, TABLE, 2, version=1)
    # [END reseal_publish]
    table = catalog.load_table(TABLE)
    assert len(table.snapshots()) == before + 1 and not outcome.published
    snapshot = table.snapshot_by_id(record.snapshot_id)
    props = h.summary_properties(snapshot)
    assert props[h.EPOCH] == "2" and props[h.VERSION] == "2" and props[h.RESEAL_REQUEST] == "fix-day-2"
    assert props[h.REASON] == "late correction of day 2" and props[h.CORRECTION] == record.correction != ""
    # One commit replaced the epoch's one file: deleted and added in the same snapshot.
    summary = snapshot.summary
    assert (summary["deleted-data-files"], summary["added-data-files"]) == ("1", "1")
    assert snapshot.parent_snapshot_id is not None and table.current_snapshot().snapshot_id == record.snapshot_id
    pd.testing.assert_frame_equal(normalized(newest.to_pandas()), sealed_frame(spark, ledger, 4), check_dtype=False)
    pd.testing.assert_frame_equal(normalized(table.scan().to_arrow().to_pandas()), sealed_frame(spark, ledger, 4),
                                  check_dtype=False)
    for through in (2, 3):  # the newest versions of epochs 1..through only
        got = normalized(table_as_of_epoch(catalog, TABLE, through).to_pandas())
        pd.testing.assert_frame_equal(got, sealed_frame(spark, ledger, through), check_dtype=False)
    old = normalized(read_sealed(spark, ledger.pipeline, PARTITION, [1, 2], zookeeper=ledger, with_epoch=False,
                                 version=1).toPandas())
    pd.testing.assert_frame_equal(normalized(original.to_pandas()), old, check_dtype=False)
    assert (normalized(newest.to_pandas()).query("epoch == 2")["amount"].to_numpy()
            - old.query("epoch == 2")["amount"].to_numpy() > 0).all()
    assert table_as_of_epoch(catalog, TABLE, 2, version=2).num_rows == len(sealed_frame(spark, ledger, 2))
    with pytest.raises(EpochNotPublished, match="version 3 of epoch 2"):
        table_as_of_epoch(catalog, TABLE, 2, version=3)
    # A repeat adds nothing and names the same snapshot; the table is whole.
    again = publish_sealed(ledger, catalog, TABLE, PARTITION, 4)
    assert [r.snapshot_id for r in again.resealed] == [record.snapshot_id] and not again.published
    table = catalog.load_table(TABLE)
    assert len(table.snapshots()) == before + 1 and len(corrective(table)) == 1
    assert table_problems(table) == []
    # Epoch 5, sealed after the correction, is published as before on top of it.
    attempt = ledger.open_epoch(5)
    assert ledger.vote(attempt, PARTITION, PRODUCER, write_run(ledger, store, 5, attempt.token, "r1")).epoch_sealed
    assert [r.epoch for r in publish_sealed(ledger, catalog, TABLE, PARTITION, 5).published] == [5]
    got = normalized(table_as_of_epoch(catalog, TABLE, 5).to_pandas())
    pd.testing.assert_frame_equal(got, sealed_frame(spark, ledger, 5), check_dtype=False)


def _race(workers: list) -> list:
    results: list = [None] * len(workers)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = workers[i]()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return results


def test_two_publishers_racing_give_one_corrective_snapshot(zk, zk_factory, spark, tmp_path):
    ledger = new_pipeline(zk, "raced")
    store = tmp_path / "store"
    seal_four_and_publish(ledger, store, sqlite_catalog(tmp_path))
    reseal_epoch_two(ledger, store, request_id="fix-raced")
    # Two publishers, each with its own ZooKeeper session and catalog client, started together.
    start = threading.Barrier(2)
    publishers = [(EpochLedger(zk_factory(), "raced", owner=f"p{i}"), sqlite_catalog(tmp_path)) for i in range(2)]

    def publish(i: int):
        start.wait()
        return publish_sealed(publishers[i][0], publishers[i][1], TABLE, PARTITION, 4)

    outcomes = _race([lambda: publish(0), lambda: publish(1)])
    table = sqlite_catalog(tmp_path).load_table(TABLE)
    (record,) = corrective(table)
    assert [[r.snapshot_id for r in o.resealed] for o in outcomes] == [[record.snapshot_id]] * 2
    pd.testing.assert_frame_equal(normalized(table.scan().to_arrow().to_pandas()), sealed_frame(spark, ledger, 4),
                                  check_dtype=False)
    assert table_problems(table) == []


def test_refused_commit_finds_the_winners_corrective_snapshot(zk, tmp_path):
    """Without the lock (as after a lock's session expired): both read the same table, both commit, the
    catalog refuses one, and the loser finds the winner's snapshot by its properties."""
    ledger = new_pipeline(zk, "refused")
    store = tmp_path / "store"
    seal_four_and_publish(ledger, store, sqlite_catalog(tmp_path))
    reseal_epoch_two(ledger, store, request_id="fix-refused")
    planned = threading.Barrier(2)
    waited: set[int] = set()

    def resealer(i: int) -> ResealPublisher:
        catalog = sqlite_catalog(tmp_path)

        def step(name: str) -> None:
            if name == "planned" and i not in waited:  # both planned on the same table before either commits
                waited.add(i)
                planned.wait(timeout=60)

        return ResealPublisher(ledger, lambda: catalog.load_table(TABLE), identifier=TABLE, partition=PARTITION,
                               on_step=step)

    results = _race([lambda: resealer(0).publish_version(2, 2), lambda: resealer(1).publish_version(2, 2)])
    table = sqlite_catalog(tmp_path).load_table(TABLE)
    (record,) = corrective(table)
    assert sorted(made for _, made in results) == [False, True]
    assert {r.snapshot_id for r, _ in results} == {record.snapshot_id}
    assert table_problems(table) == []
