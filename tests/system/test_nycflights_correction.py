"""Issue 39's done-when on real parts: the nycflights pipeline (running totals carried from day to day)
for 20 days as real Airflow DAG runs of ``nycflights_daily`` on real Spark (Connect) and a real
ZooKeeper, then the flights feed of day 8 arrives corrected and one run of ``nycflights_correct``
re-seals it.

- exactly the affected seals get a new version: ``flights``@8 and ``daily``@8..20 (the day's figures
  read ``flights``; every later day read the running totals of the day before); ``weather`` and every
  other seal stay version 1; no epoch opened, no attempt started, each new version sealed once, in
  the order the correction planned;
- every figure (each day's rows and the running totals through day 20) equals one Spark computation
  over the corrected input, and the Iceberg table, read by DuckDB, equals the newest seals (one
  corrective snapshot per re-sealed day);
- the correction re-produces with the daily DAG's own tasks (``SparkCorrectionOperator(group=epoch)``:
  no second map of the jobs) and, done, emits one asset event of ``daily`` per re-sealed day, with the day
  as partition key (what schedules ``nycflights_report`` again for each, by itself), each naming version 2;
- the report consumer runs once per affected key: the asset watcher of ``daily``
  (``SealedPartitionEventTrigger``, as the triggerer runs it) gives exactly one event per re-sealed day,
  naming version 2, and nothing for the others; one report run per event rewrites that day's report.

20 days: a day costs about 5 s here (three Spark jobs on the warm Connect server) and a re-produced
seal about 2 s, so the whole test stays within a few minutes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.tables import catalog_settings, load_catalog
from airflow_epochs.tables import history as h
from airflow_epochs.tables.duckdb_reader import published_check
from airflow_epochs.triggers.assets import SealedPartitionEventTrigger

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "dags"))
from nycflights.check import check_sealed  # noqa: E402
from nycflights.data import correct_day, day_of_epoch  # noqa: E402
from nycflights_days import seal_days, succeeded  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]
DAYS = 20
CORRECTED = 8


def _events(scope: str, count: int, grace: float = 2.0, timeout: float = 120.0) -> list[dict]:
    """What the asset watcher of ``daily`` delivers now: wait for ``count`` events, then ``grace``
    seconds more for any event that should not come."""

    async def watch() -> list[dict]:
        seen: list[dict] = []

        async def collect() -> None:
            async for event in SealedPartitionEventTrigger(pipeline="nycflights", partition="daily",
                                                           scope=scope).run():
                seen.append(event.payload)

        runner = asyncio.create_task(collect())
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline and not runner.done():
            await asyncio.sleep(0.2)
        await asyncio.sleep(grace)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return seen

    return asyncio.run(watch())


def _correction_events(run_id: str) -> list[tuple[str, int, int]]:
    """The asset events of ``daily`` the correction run emitted: (partition key, epoch, version) of each."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent

    with create_session() as session:
        rows = session.query(AssetEvent).filter(AssetEvent.source_dag_id == "nycflights_correct",
                                                AssetEvent.source_run_id == run_id).all()
        found = [(row.partition_key, SealedPartitionEvent.from_extra(row.extra, partition_key=row.partition_key))
                 for row in rows if row.extra.get("partition") == "daily"]
    return sorted(((key, event.epoch, event.version) for key, event in found), key=lambda item: item[1])


def _versions(ledger: EpochLedger) -> dict[tuple[int, str], int]:
    return {(epoch, partition): ledger.corrections.sealed_version(epoch, partition).version
            for epoch in range(1, DAYS + 1) for partition in ("flights", "weather", "daily")}


def test_a_corrected_day_reseals_exactly_what_read_it(dagbag, zk_connection, zk, spark, spark_connect, tmp_path,
                                                     monkeypatch):
    raw, extra = seal_days(dagbag, monkeypatch, tmp_path, spark_connect, DAYS)
    ledger = EpochLedger(zk, "nycflights")
    assert ledger.frontier() == DAYS
    first = _events("reports", DAYS)
    assert [(e["epoch"], e["version"]) for e in first] == [(n, 1) for n in range(1, DAYS + 1)]
    before = _versions(ledger)
    assert set(before.values()) == {1}
    seen = max(e.seq for e in ledger.history())

    assert correct_day(raw, "flights", day_of_epoch(CORRECTED)) > 0  # the corrected feed lands
    run = dagbag.get_dag("nycflights_correct").test(run_conf={"epoch": CORRECTED, "feed": "flights",
                                                              "reason": "corrected flights of day 8"})
    assert succeeded(run)
    assert _correction_events(run.run_id) == [(str(e), e, 2) for e in range(CORRECTED, DAYS + 1)]

    # Exactly the affected seals got a new version, once each, in the planned (epoch) order.
    stale = [(CORRECTED, "daily"), *((e, "daily") for e in range(CORRECTED + 1, DAYS + 1))]
    expected = {(CORRECTED, "flights"), *stale}
    after = _versions(ledger)
    assert {k for k, v in after.items() if v != 1} == expected
    assert {after[k] for k in expected} == {2}
    (correction,) = ledger.corrections.list()
    assert correction.state == "done" and list(correction.plan) == stale
    events = ledger.history(since_seq=seen)
    assert not [e.event for e in events if e.event in ("epoch_opened", "attempt_started", "partition_sealed",
                                                         "epoch_sealed", "rolled_back")]
    sealed = [(e.detail["epoch"], e.detail["partition"]) for e in events if e.event == "version_sealed"]
    assert sealed == [(CORRECTED, "flights"), *stale]
    assert ledger.frontier() == DAYS

    # Every figure equals one Spark computation over the corrected input; the table follows the seals.
    result = check_sealed(spark, ledger, raw, [day_of_epoch(n) for n in range(1, DAYS + 1)])
    assert result.equal, result.summary()
    assert len(result.totals) > 0 and len(result.rows) > 15 * DAYS
    ok, verdict = published_check(ledger, "nycflights_iceberg", "nycflights.daily", "daily", DAYS)
    assert ok, verdict
    table = load_catalog(catalog_settings(extra=extra)).load_table("nycflights.daily")
    resealed = [(r.epoch, r.version) for r in (h.published(s) for s in table.snapshots())
                if r is not None and r.action == "reseal"]
    assert resealed == [(e, 2) for e in range(CORRECTED, DAYS + 1)]

    # The report consumer: one event per re-sealed key, naming its version; one report run each.
    again = _events("reports", len(stale))
    assert [(e["epoch"], e["version"], e["correction"]) for e in again] == [
        (e, 2, correction.id) for e in range(CORRECTED, DAYS + 1)]
    assert len({e["dedupe_key"] for e in again}) == len(again)
    report = dagbag.get_dag("nycflights_report")
    for event in again:
        assert succeeded(report.test(run_conf={"epoch": event["epoch"]})), event
    for n in range(CORRECTED, DAYS + 1):  # rewritten from the new version
        assert "version 2;" in (tmp_path / "reports" / f"report-{day_of_epoch(n):%Y-%m-%d}.md").read_text(), n
    assert _events("reports", 0, grace=2.0) == []  # the same watcher again: nothing delivered twice
