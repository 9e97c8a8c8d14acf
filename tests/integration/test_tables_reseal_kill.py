"""A publisher killed (``kill -9``) between a re-seal's corrective commit and its answer, then the retry in a
fresh process (as the scheduler's next try): the table holds ONE corrective snapshot of the re-seal, the
retry answers with it and adds nothing, and the table equals the newest versions. Killed before the
commit instead ("planned"), the retry makes the one snapshot. Real ZooKeeper, pyiceberg's SQL catalog on
SQLite, a publishing process of its own (``tests/helpers/publish_worker.py``); the table is compared with the
newest seals read from their manifests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tables_helpers import PARTITION, new_pipeline, normalized
from test_tables_reseal import TABLE, corrective, reseal_epoch_two, seal_four_and_publish

from airflow_epochs.spark import sealed_outputs
from airflow_epochs.tables import catalog_settings, load_catalog, table_as_of_epoch, table_problems

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def newest_sealed(ledger, through: int) -> pd.DataFrame:
    """The newest sealed version of epochs 1..through, read from the seals' manifests (pyarrow)."""
    frames = [pd.read_parquet(item.path) for item in sealed_outputs(ledger, PARTITION, range(1, through + 1))]
    return normalized(pd.concat(frames, ignore_index=True))


def _worker(zk_server, chroot: str, settings, pipeline: str, kill_at: str) -> subprocess.CompletedProcess:
    payload = json.dumps({"name": settings.name, "kind": settings.kind, "properties": dict(settings.properties),
                          "secret": dict(settings.secret)})
    return subprocess.run([sys.executable, str(HELPERS / "publish_worker.py"), zk_server.address + chroot, pipeline,
                           TABLE, PARTITION, "4", kill_at], input=payload, capture_output=True, text=True,
                          timeout=180, cwd=HELPERS, env=zk_server.env())


@pytest.mark.parametrize("kill_at", ["planned", "committed"])
def test_kill_9_around_the_corrective_commit_then_retry_gives_one_snapshot(zk, zk_server, zk_chroot, tmp_path,
                                                                           kill_at):
    settings = catalog_settings(extra={"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"),
                                       "warehouse": (tmp_path / "warehouse").as_uri(), "name": "killed"})
    catalog = load_catalog(settings)
    ledger = new_pipeline(zk, "killed_reseal")
    store = tmp_path / "store"
    seal_four_and_publish(ledger, store, catalog)
    reseal_epoch_two(ledger, store, request_id=f"fix-{kill_at}")
    before = len(catalog.load_table(TABLE).snapshots())

    killed = _worker(zk_server, zk_chroot, settings, "killed_reseal", kill_at)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert killed.stdout.splitlines()[-1] == f"step {kill_at}"
    table = catalog.load_table(TABLE)
    assert len(corrective(table)) == (1 if kill_at == "committed" else 0)  # the kill came after / before it

    retried = _worker(zk_server, zk_chroot, settings, "killed_reseal", "never")
    assert retried.returncode == 0, retried.stderr[-3000:]
    result = json.loads(retried.stdout.strip().splitlines()[-1])
    table = catalog.load_table(TABLE)
    (record,) = corrective(table)
    assert (record.epoch, record.version) == (2, 2) and record.correction
    assert [r["snapshot_id"] for r in result["resealed"]] == [record.snapshot_id]  # found or made: the same one
    assert not result["published"]
    assert len(table.snapshots()) == before + 1 and table_problems(table) == []
    got = normalized(table_as_of_epoch(catalog, TABLE, 4).to_pandas())
    pd.testing.assert_frame_equal(got, newest_sealed(ledger, 4), check_dtype=False)
    # A third publish, with nothing left to do, adds nothing either.
    again = _worker(zk_server, zk_chroot, settings, "killed_reseal", "never")
    assert again.returncode == 0 and len(catalog.load_table(TABLE).snapshots()) == before + 1


def test_table_read_names_the_version_it_reads(zk, tmp_path, capsys):
    """``airflow-epochs table read --as-of-epoch N --version V``: the table as version V of epoch N went in
    (the original after a re-seal replaced it), the newest by default; a version not published is refused."""
    from airflow_epochs.cli import main

    extra = {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "warehouse").as_uri()}
    catalog = load_catalog(catalog_settings(extra=extra))
    ledger = new_pipeline(zk, "read_versions")
    store = tmp_path / "store"
    seal_four_and_publish(ledger, store, catalog)
    reseal_epoch_two(ledger, store, request_id="fix-read")
    from airflow_epochs.tables import publish_sealed

    publish_sealed(ledger, catalog, TABLE, PARTITION, 4)
    where = ["--sqlite", extra["sqlite"], "--warehouse", extra["warehouse"], "--format", "json"]
    seen = {}
    for version in (None, 1, 2):
        capsys.readouterr()
        args = ["table", "read", TABLE, "--as-of-epoch", "2", *where, *([] if version is None else
                                                                          ["--version", str(version)])]
        assert main(args) == 0
        out = capsys.readouterr()
        rows = [json.loads(line) for line in out.out.splitlines()]
        want = table_as_of_epoch(catalog, TABLE, 2, version=version).to_pylist()
        assert sorted(rows, key=lambda r: (r["epoch"], r["key"])) == sorted(want, key=lambda r: (r["epoch"], r["key"]))
        assert ("version" in out.err) == (version is not None)
        seen[version] = {(r["epoch"], r["key"]): r["amount"] for r in rows}
    assert seen[None] == seen[2] != seen[1]  # the newest is version 2; version 1 is the original
    assert all(seen[2][k] > seen[1][k] for k in seen[1] if k[0] == 2)
    assert all(seen[2][k] == seen[1][k] for k in seen[1] if k[0] == 1)
    assert main(["table", "read", TABLE, "--as-of-epoch", "2", "--version", "3", *where]) == 2
    assert "version 3 of epoch 2" in capsys.readouterr().err
    assert main(["table", "epochs", TABLE, "--version", "1", *where[:4]]) == 2
    assert "--version is for table read" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["table", "read", TABLE, "--as-of-epoch", "2", "--version", "0", *where])
