"""Several published tables read at one epoch as one consistent cut (real ZooKeeper, real PySpark, a
pyiceberg SQL catalog on the tests' PostgreSQL server): read at an aligned epoch, each table equals
``read_sealed`` through it; refused, with nothing read, when the epoch is not sealed in every partition
or a table's snapshot is not the current seal (a rollback not yet mirrored)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import types
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
from tables_helpers import PRODUCER, job_for, normalized, pg_catalog

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.hooks.ledgers import ledger_on
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


def cli_cut(zk_server, chroot: str, settings, epoch: int) -> subprocess.CompletedProcess:
    """``airflow-epochs table cut`` of both tables at ``epoch`` (the catalog from an Airflow connection)."""
    conn = {"conn_type": "iceberg", "host": "127.0.0.1", "port": settings.port, "login": settings.user,
            "password": settings.password, "schema": "iceberg", "extra": settings.extra}
    env = zk_server.env(AIRFLOW_CONN_CUT_LAKE=json.dumps(conn))  # the CLI finds the server's credentials there
    tables = list(PARTITIONS.values())
    return subprocess.run([str(Path(sys.executable).parent / "airflow-epochs"), "table", "cut", tables[0], "--with",
                           tables[1], "--as-of-epoch", str(epoch), "--conn-id", "cut_lake", "--zk-hosts",
                           zk_server.address + chroot], env=env, capture_output=True, text=True, timeout=300)


def test_an_aligned_epoch_is_one_cut_and_anything_else_is_refused(zk, zk_server, zk_chroot, spark, tmp_path, pg):
    settings = pg_catalog(pg, tmp_path / "warehouse")
    catalog = load_catalog(settings)
    ledger = EpochLedger(zk, "cut", owner="tests")
    ledger.create_pipeline(PipelineConfig({p: (PRODUCER,) for p in PARTITIONS}))
    main, store = job_for(), tmp_path / "store"
    for epoch in (1, 2, 3):
        seal(zk, spark, ledger, store, epoch, PARTITIONS, main)
        for partition, table in PARTITIONS.items():
            publish_sealed(ledger, catalog, table, partition, epoch)

    for epoch in (2, 3):
        cut = read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), epoch)
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
        read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 4)
    with pytest.raises(NotAlignedCut, match=r"epoch 4 is not aligned.*'weekly'"):
        read_sealed_cut(partial(ledger_on, zk), catalog, [PARTITIONS["daily"]], 4)
    # ...while epoch 3 is still one cut.
    assert read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 3).epoch == 3

    # A rollback to 2, epoch 3 run again and sealed, but the tables not published again yet: the
    # tables' snapshots of 3 are the rolled-back attempt's, so 3 is refused, and 2 is still a cut.
    ledger.rollback(2, reason="test")
    seal(zk, spark, ledger, store, 3, PARTITIONS, main)
    with pytest.raises(NotAlignedCut, match="publish it again first"):
        read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 3)
    assert read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 2).epoch == 2
    # The same through the CLI: refused with the reason and no rows at 3; both tables' rows at 2.
    conn = types.SimpleNamespace(port=pg.port, user=pg.user, password=pg.password,
                                 extra={"catalog": "sql", "warehouse": (tmp_path / "warehouse").as_uri(),
                                        "name": settings.name})
    refused = cli_cut(zk_server, zk_chroot, conn, 3)
    assert refused.returncode != 0 and "publish it again first" in refused.stderr
    assert not any(line.startswith(("table,", "epochs.")) for line in refused.stdout.splitlines())  # no rows
    done = cli_cut(zk_server, zk_chroot, conn, 2)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = list(csv.reader(io.StringIO(done.stdout)))
    for partition, table in PARTITIONS.items():
        assert sum(1 for row in printed if row[0] == table) == len(sealed_rows(spark, ledger, partition, 2))
    for partition, table in PARTITIONS.items():
        publish_sealed(ledger, catalog, table, partition, 3)
    cut = read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 3)
    for partition, table in PARTITIONS.items():
        pd.testing.assert_frame_equal(normalized(cut.rows[table].to_pandas()), sealed_rows(spark, ledger, partition, 3))


def test_a_table_whose_partition_has_no_seal_at_the_epoch_is_refused(zk, spark, tmp_path, pg):
    """Rolled back to 1, the pipeline drops ``weekly`` from epoch 2 on and seals 2 again with ``daily``
    only: epoch 2 is sealed, but ``weekly`` has no seal at 2, so the weekly table's snapshot of 2 (the
    rolled-back one, not mirrored yet) is not part of any cut, as the publisher would also say."""
    from airflow_epochs.tables.seal_files import still_sealed

    catalog = load_catalog(pg_catalog(pg, tmp_path / "warehouse"))
    ledger = EpochLedger(zk, "cutdrop", owner="tests")
    ledger.create_pipeline(PipelineConfig({p: (PRODUCER,) for p in PARTITIONS}))
    main, store = job_for(), tmp_path / "store"
    for epoch in (1, 2):
        seal(zk, spark, ledger, store, epoch, PARTITIONS, main)
        for partition, table in PARTITIONS.items():
            publish_sealed(ledger, catalog, table, partition, epoch)
    ledger.rollback(1, reason="weekly goes")
    ledger.set_config(PipelineConfig({"daily": (PRODUCER,)}), from_epoch=2)
    seal(zk, spark, ledger, store, 2, ["daily"], main)
    publish_sealed(ledger, catalog, PARTITIONS["daily"], "daily", 2)
    assert ledger.epoch_info(2).state == "sealed" and ledger.seal_record(2, "weekly") is None

    from airflow_epochs.tables import history as h

    weekly = h.snapshot_of_epoch(catalog.load_table(PARTITIONS["weekly"]), 2)  # still live: not mirrored
    assert not still_sealed(ledger, "weekly", weekly)
    with pytest.raises(NotAlignedCut, match=r"epochs\.cut_weekly.*no seal"):
        read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 2)
    assert read_sealed_cut(partial(ledger_on, zk), catalog, list(PARTITIONS.values()), 1).epoch == 1
