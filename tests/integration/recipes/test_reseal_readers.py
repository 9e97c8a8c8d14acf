"""Readers after a re-seal (real ZooKeeper, real PySpark): ``sealed_outputs`` and ``read_sealed`` read
the newest version by default and name it, read a given version when asked, garbage collection keeps
every version's runs, and an old version says which correction superseded it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_epochs.coordination import EpochLedger, PartitionNotSealed, PipelineConfig
from airflow_epochs.spark import read_sealed, sealed_outputs, sealed_runs
from airflow_epochs.spark.storage import run_location

pytestmark = pytest.mark.integration


def _manifest(store: Path, epoch: int, attempt: int, run: str, amount: int) -> dict:
    location = run_location(str(store), "daily-totals", "daily", epoch, attempt, run)
    Path(location, "data").mkdir(parents=True)
    pq.write_table(pa.table({"key": ["k"], "amount": [amount]}), Path(location, "data", "part-0.parquet"))
    return {"epoch": epoch, "attempt": attempt, "run": run, "location": location,
            "outputs": {"data": {"path": location + "/data", "format": "parquet", "rows": 1, "checksum": "c",
                                 "files": 1}}}


def test_readers_see_the_newest_version_and_can_ask_for_another(zk, tmp_path, spark):
    store = tmp_path / "store"
    ledger = EpochLedger(zk, "daily-totals", owner="o")
    ledger.create_pipeline(PipelineConfig({"daily": ("job",)}))
    tokens = {}
    for epoch in (1, 2, 3):
        attempt = ledger.open_epoch(epoch)
        tokens[epoch] = attempt.token
        ledger.vote(attempt, "daily", "job", _manifest(store, epoch, attempt.token, "r1", epoch * 10))
    asked = ledger.corrections.reseal(2, "daily", reason="late rows for day 2")
    ledger.corrections.vote_version(2, "daily", asked.version, "job", _manifest(store, 2, tokens[2], "r2", 25))

    newest = sealed_outputs(ledger, "daily", [1, 2, 3])
    assert [(o.epoch, o.version) for o in newest] == [(1, 1), (2, 2), (3, 1)]
    assert newest[1].path.endswith("/run=r2/data")
    first = sealed_outputs(ledger, "daily", [2], version=1)
    assert [(o.version, o.path.endswith("/run=r1/data")) for o in first] == [(1, True)]
    with pytest.raises(PartitionNotSealed, match=r"not sealed as version 2 at epoch 1"):
        sealed_outputs(ledger, "daily", [1], version=2)
    assert [r.rsplit("/", 1)[1] for r in sealed_runs(ledger, "daily", 2)] == ["run=r1", "run=r2"]

    frame = read_sealed(spark, "daily-totals", "daily", [1, 2, 3], zookeeper=ledger)
    assert sorted((r["epoch"], r["amount"]) for r in frame.collect()) == [(1, 10), (2, 25), (3, 30)]
    old = read_sealed(spark, "daily-totals", "daily", [2], zookeeper=ledger, version=1)
    assert [r["amount"] for r in old.collect()] == [20]

    view = ledger.corrections.sealed_version(2, "daily", 1)
    assert view is not None and view.stale and view.stale_by == asked.correction and view.resealed_at is not None
    assert ledger.corrections.sealed_version(2, "daily").version == 2
