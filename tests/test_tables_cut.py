"""Several published tables read at one epoch as one consistent cut (real ZooKeeper, real PySpark, a
pyiceberg SQL catalog on the tests' PostgreSQL server): read at an aligned epoch, each table equals
``read_sealed`` through it; refused, with nothing read, when the epoch is not sealed in every partition
or a table's snapshot is not the current seal (a rollback not yet mirrored)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tables_helpers import PRODUCER, job_for, normalized, pg_catalog

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.spark import read_sealed, run_epoch, submit_and_seal
from airflow_epochs.tables import EpochNotPublished, load_catalog, publish_sealed
from airflow_epochs.tables.cut import NotAlignedCut, read_sealed_cut

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PARTITIONS = {"daily": "epochs.cut_daily", "weekly": "epochs.cut_weekly"}


@pytest.fixture(scope="module")
def pg():
    from postgres_server import running_postgres

    with running_postgres("iceberg") as server:
        yield server


def seal(zk, spark, ledger, storage: Path, epoch: int, partitions, main) -> None:
    attempt = ledger.open_epoch(epoch)
    for partition in partitions:
        outcome = submit_and_seal(zk, attempt, partition, PRODUCER, storage=str(storage),
                                  runner=lambda context: run_epoch(main, spark, context))
        assert outcome.partition_sealed


def sealed_rows(spark, ledger, partition: str, through: int) -> pd.DataFrame:
    return normalized(read_sealed(spark, ledger.pipeline, partition, range(1, through + 1), zookeeper=ledger,
                                  with_epoch=False).toPandas())


def test_an_aligned_epoch_is_one_cut_and_anything_else_is_refused(zk, spark, tmp_path, pg):
    catalog = load_catalog(pg_catalog(pg, tmp_path / "warehouse"))
    ledger = EpochLedger(zk, "cut", owner="tests")
    ledger.create_pipeline(PipelineConfig({p: (PRODUCER,) for p in PARTITIONS}))
    main, store = job_for(), tmp_path / "store"
    for epoch in (1, 2, 3):
        seal(zk, spark, ledger, store, epoch, PARTITIONS, main)
        for partition, table in PARTITIONS.items():
            publish_sealed(ledger, catalog, table, partition, epoch)

    for epoch in (2, 3):
        cut = read_sealed_cut(zk, catalog, list(PARTITIONS.values()), epoch)
        assert {(m.table, m.partition) for m in cut.members} == {(t, p) for p, t in PARTITIONS.items()}
        for partition, table in PARTITIONS.items():
            got = normalized(cut.rows[table].to_pandas())
            pd.testing.assert_frame_equal(got, sealed_rows(spark, ledger, partition, epoch))
            [member] = [m for m in cut.members if m.table == table]
            assert (member.attempt, member.request) == (ledger.seal_record(epoch, partition).attempt,
                                                        ledger.seal_record(epoch, partition).request)

    # Epoch 4: daily sealed and published, weekly not sealed: not aligned.
    attempt = ledger.open_epoch(4)
    submit_and_seal(zk, attempt, "daily", PRODUCER, storage=str(store),
                    runner=lambda context: run_epoch(main, spark, context))
    publish_sealed(ledger, catalog, PARTITIONS["daily"], "daily", 4)
    with pytest.raises(EpochNotPublished, match="epoch 4"):
        read_sealed_cut(zk, catalog, list(PARTITIONS.values()), 4)
    with pytest.raises(NotAlignedCut, match=r"epoch 4 is not aligned.*'weekly'"):
        read_sealed_cut(zk, catalog, [PARTITIONS["daily"]], 4)
    # ...while epoch 3 is still one cut.
    assert read_sealed_cut(zk, catalog, list(PARTITIONS.values()), 3).epoch == 3

    # A rollback to 2, epoch 3 run again and sealed, but the tables not published again yet: the
    # tables' snapshots of 3 are the rolled-back attempt's, so 3 is refused, and 2 is still a cut.
    ledger.rollback(2, reason="test")
    seal(zk, spark, ledger, store, 3, PARTITIONS, main)
    with pytest.raises(NotAlignedCut, match="publish it again first"):
        read_sealed_cut(zk, catalog, list(PARTITIONS.values()), 3)
    assert read_sealed_cut(zk, catalog, list(PARTITIONS.values()), 2).epoch == 2
    for partition, table in PARTITIONS.items():
        publish_sealed(ledger, catalog, table, partition, 3)
    cut = read_sealed_cut(zk, catalog, list(PARTITIONS.values()), 3)
    for partition, table in PARTITIONS.items():
        pd.testing.assert_frame_equal(normalized(cut.rows[table].to_pandas()), sealed_rows(spark, ledger, partition, 3))
