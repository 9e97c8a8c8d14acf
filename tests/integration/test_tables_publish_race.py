"""Two and three publishers of one table started together (separate processes, as two overlapping DAG
runs, two deployments, or a zombie and its retry), on SQLite and PostgreSQL catalogs, with a column
added at epoch 4: exactly one snapshot per sealed (epoch, partition), in epoch order, the table whole,
and pyiceberg and DuckDB read what ``read_sealed`` reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables_helpers import PARTITION, PRODUCER, events, new_pipeline, normalized, pg_catalog, sealed_frame

from airflow_epochs.spark.storage import run_location
from airflow_epochs.tables import catalog_settings, load_catalog, table_as_of_epoch, table_problems
from airflow_epochs.tables import history as h
from airflow_epochs.tables.duckdb_reader import connect, scan_sql

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HELPERS = Path(__file__).resolve().parents[1] / "helpers"
EPOCHS = 6
NOTE_FROM = 4  # the column added in the middle
RACES_PER_CATALOG = 10  # half with two publishers, half with three: 20 races over both catalogs
# What each publisher publishes through, in turn (a publish of e first publishes every epoch before it).
PATTERNS = ([EPOCHS], [2, 4, EPOCHS], [3, EPOCHS], list(range(1, EPOCHS + 1)))


def seal_by_hand(ledger, store: Path, epoch: int) -> None:
    """Open ``epoch`` and seal it with one Parquet file of the epoch's per-key figures where the storage
    layout puts it (from epoch 4 on with a ``note`` column): no Spark job, the races are what is tested."""
    attempt = ledger.open_epoch(epoch)
    location = run_location(str(store), ledger.pipeline, PARTITION, epoch, attempt.token, "r1")
    figures: dict[str, list[int]] = {}
    for key, amount in events(epoch):
        figures.setdefault(key, []).append(amount)
    rows = {"key": sorted(figures), "events": [len(figures[k]) for k in sorted(figures)],
            "amount": [sum(figures[k]) for k in sorted(figures)], "epoch": [epoch] * len(figures)}
    if epoch >= NOTE_FROM:
        rows["note"] = [f"e{epoch}"] * len(figures)
    Path(location, "data").mkdir(parents=True)
    pq.write_table(pa.table(rows), Path(location, "data", "part-0.parquet"))
    manifest = {"epoch": epoch, "attempt": attempt.token, "run": "r1", "location": location,
                "outputs": {"data": {"path": f"{location}/data", "format": "parquet", "rows": len(figures),
                                     "checksum": "c", "files": 1}}}
    assert ledger.vote(attempt, PARTITION, PRODUCER, manifest).epoch_sealed


@pytest.fixture(scope="module")
def sealed(zk_server, spark, tmp_path_factory):
    """Epochs 1..6 of one pipeline sealed (``note`` appears at epoch 4), shared by every race: each race
    publishes them into a table of its own. What ``read_sealed`` reads of them is the expected table."""
    chroot = f"/tests/publish-race-{uuid.uuid4().hex[:8]}"
    admin = zk_server.client()
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    client = zk_server.client(chroot)
    ledger = new_pipeline(client, "race")
    store = tmp_path_factory.mktemp("race-store")
    for epoch in range(1, EPOCHS + 1):
        seal_by_hand(ledger, store, epoch)
    yield SimpleNamespace(hosts=zk_server.address + chroot, env=zk_server.env(), ledger=ledger,
                          frames={n: sealed_frame(spark, ledger, n) for n in (3, EPOCHS)})
    client.stop()
    client.close()


@pytest.fixture(scope="module")
def pg():
    from postgres_server import running_postgres

    with running_postgres("iceberg") as server:
        yield server


def _settings(kind: str, pg_server, folder: Path):
    if kind == "postgresql":
        return pg_catalog(pg_server, folder / "warehouse")
    return catalog_settings(extra={"catalog": "sql", "sqlite": str(folder / "catalog.db"),
                                   "warehouse": (folder / "warehouse").as_uri(), "name": "race"})


def _start_publishers(sealed, settings, go_dir: Path, races: list[dict]) -> list[subprocess.Popen]:
    catalog = {"name": settings.name, "kind": settings.kind, "properties": dict(settings.properties),
               "secret": dict(settings.secret)}
    workers = []
    for worker in range(3):
        mine = [{"table": r["table"], "through": PATTERNS[(i + worker) % len(PATTERNS)]}
                for i, r in enumerate(races) if worker < r["publishers"]]
        proc = subprocess.Popen([sys.executable, str(HELPERS / "publish_worker.py"), "race", sealed.hosts,
                                 sealed.ledger.pipeline, PARTITION, str(go_dir), str(worker)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=HELPERS, env=sealed.env)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"catalog": catalog, "races": mine}) + "\n")
        proc.stdin.flush()
        workers.append(proc)
    return workers


def _run_races(workers: list[subprocess.Popen], go_dir: Path, races: list[dict]) -> None:
    """Start each race once all its publishers wait at the line; the next once they all finished it."""
    for race in races:
        deadline = time.monotonic() + 120
        while len(list(go_dir.glob(f"{race['table']}.ready-*"))) < race["publishers"]:
            failed = [p.returncode for p in workers if p.poll() not in (None, 0)]
            assert not failed and time.monotonic() < deadline, f"publishers gone or stuck before {race['table']}"
            time.sleep(0.005)
        (go_dir / f"{race['table']}.go").touch()


def _check_table(sealed, catalog, identifier: str) -> None:
    ledger = sealed.ledger
    table = catalog.load_table(identifier)
    records = [r for r in (h.published(s) for s in h.ancestry(table)) if r is not None]
    assert [r.epoch for r in reversed(records)] == list(range(1, EPOCHS + 1)), identifier  # once each, in order
    assert len(table.snapshots()) == EPOCHS  # nothing else was committed: no stray snapshot either
    for record in records:
        seal = ledger.seal_record(record.epoch, PARTITION)
        assert (record.action, record.attempt, record.generation, record.request) == \
            (h.PUBLISH, seal.attempt, seal.generation, seal.request)
    assert table_problems(table, files=True) == []
    assert table.properties.get("commit.retry.num-retries") == "0"
    want = sealed.frames[EPOCHS]
    pd.testing.assert_frame_equal(normalized(table.scan().to_arrow().to_pandas()), want, check_dtype=False)
    duck = connect()
    try:
        seen = duck.execute(f"SELECT * FROM {scan_sql(str(table.metadata_location))}").df()
    finally:
        duck.close()
    pd.testing.assert_frame_equal(normalized(seen), want, check_dtype=False)
    earlier = normalized(table_as_of_epoch(catalog, identifier, 3).to_pandas())
    pd.testing.assert_frame_equal(earlier, sealed.frames[3], check_dtype=False)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_and_three_publishers_started_together_publish_each_epoch_once(sealed, pg, tmp_path, kind):
    settings = _settings(kind, pg, tmp_path)
    catalog = load_catalog(settings)
    go_dir = tmp_path / "go"
    go_dir.mkdir()
    races = [{"table": f"epochs.race_{kind}_{i}", "publishers": 2 if i % 2 == 0 else 3}
             for i in range(RACES_PER_CATALOG)]
    workers = _start_publishers(sealed, settings, go_dir, races)
    try:
        _run_races(workers, go_dir, races)
        outputs = [p.communicate(timeout=300) for p in workers]
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_out, err) in zip(workers, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    results = [json.loads(line) for out, _err in outputs for line in out.splitlines() if line.startswith("{")]
    assert len(results) == sum(r["publishers"] for r in races)
    assert not [r for r in results if "error" in r]
    for race in races:
        mine = [r for r in results if r["table"] == race["table"]]
        made = sorted(e for r in mine for e in r["published"])
        # One publisher made each epoch; the others found it (the lock serialized them).
        assert made == list(range(1, EPOCHS + 1)), (race, mine)
        _check_table(sealed, catalog, race["table"])
