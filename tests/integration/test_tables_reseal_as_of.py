"""Reading a table as of an epoch after an earlier epoch was re-sealed: DuckDB (through the snapshot id of
an epoch, or its files) and consistent cuts read the newest version of every epoch through it, never the
version the epoch's own publish showed; a cut refuses a table whose re-seal is not published yet.

Epochs 1..4 of a partition that reads no snapshot are sealed and published; then epoch 2 is re-sealed (every
amount corrected) and only epoch 2 gets version 2. Real ZooKeeper, pyiceberg's SQL catalog on SQLite,
DuckDB with its extensions from their packages."""

from __future__ import annotations

import pandas as pd
import pytest
from tables_helpers import PARTITION, new_pipeline, normalized
from test_tables_reseal import TABLE, reseal_epoch_two, seal_four_and_publish, sqlite_catalog
from test_tables_reseal_kill import newest_sealed

from airflow_epochs.tables import (
    NoSnapshotOfItsOwn,
    NotAlignedCut,
    publish_sealed,
    read_sealed_cut,
    snapshot_id_of_epoch,
)
from airflow_epochs.tables import history as h
from airflow_epochs.tables.cut import plan_sealed_cut
from airflow_epochs.tables.duckdb_reader import as_of_sql, connect, matches_sealed, scan_sql

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _duck(sql_source: str) -> pd.DataFrame:
    duck = connect()
    try:
        return normalized(duck.execute(f"SELECT * FROM {sql_source}").df())
    finally:
        duck.close()


def test_as_of_an_epoch_after_an_earlier_epoch_was_resealed(zk, tmp_path):
    ledger = new_pipeline(zk, "as_of")
    store = tmp_path / "store"
    catalog = sqlite_catalog(tmp_path)
    seal_four_and_publish(ledger, store, catalog)
    original_four = snapshot_id_of_epoch(catalog, TABLE, 4)
    reseal_epoch_two(ledger, store, request_id="fix-2")

    # Sealed, not published yet: a cut at any epoch from 2 on refuses the table (it shows version 1 of 2);
    # before epoch 2 it is current.
    for epoch in (2, 4):
        with pytest.raises(NotAlignedCut, match="epoch 2 is published as version 1, but the newest sealed version"):
            plan_sealed_cut(lambda _: ledger, catalog, [TABLE], epoch)
    assert plan_sealed_cut(lambda _: ledger, catalog, [TABLE], 1)

    (record,) = publish_sealed(ledger, catalog, TABLE, PARTITION, 4).resealed
    table = catalog.load_table(TABLE)
    # As of epoch 4: the corrective snapshot (epoch 4's own publish still shows epoch 2's version 1).
    assert snapshot_id_of_epoch(catalog, TABLE, 4) == record.snapshot_id != original_four
    pd.testing.assert_frame_equal(_duck(scan_sql(table.metadata_location, snapshot_id_of_epoch(catalog, TABLE, 4))),
                                  newest_sealed(ledger, 4), check_dtype=False)
    assert matches_sealed(ledger, catalog, TABLE, PARTITION, 4)[0]
    # As of epoch 3: no snapshot shows epochs 1..3 alone at their newest versions (the corrective one
    # holds epoch 4 too): the snapshot id is refused, and DuckDB reads the epochs' files instead.
    with pytest.raises(NoSnapshotOfItsOwn, match="as of epoch 3 alone"):
        snapshot_id_of_epoch(catalog, TABLE, 3)
    source, what = as_of_sql(catalog, TABLE, 3)
    assert source.startswith("read_parquet(") and f"of snapshot {record.snapshot_id}" in what
    pd.testing.assert_frame_equal(_duck(source), newest_sealed(ledger, 3), check_dtype=False)
    ok, verdict = matches_sealed(ledger, catalog, TABLE, PARTITION, 3)
    assert ok, verdict
    # Epoch 1, untouched: its own publish.
    assert snapshot_id_of_epoch(catalog, TABLE, 1) == h.snapshot_of_epoch(table, 1).snapshot_id

    # Cuts read the newest versions, and no epoch after the cut's.
    for epoch in (2, 3, 4):
        cut = read_sealed_cut(lambda _: ledger, catalog, [TABLE], epoch)
        pd.testing.assert_frame_equal(normalized(cut.rows[TABLE].to_pandas()), newest_sealed(ledger, epoch),
                                      check_dtype=False)
