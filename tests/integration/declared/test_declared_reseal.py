"""A declared producer that runs again after its key was sealed, with ``reseal``: the key's partition is
re-sealed as a new version carrying the re-run's vote; no later epoch is rolled back, the frontier stays,
and a repeat of the same re-run applies nothing twice (real ZooKeeper)."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.declared.records import StagedVote
from airflow_epochs.coordination.declared.votes import TaskInstanceId, drain, stage_vote
from airflow_epochs.coordination.wire.declared import DeclaredProducers, ExplicitKeys, Match, TaskProducer

pytestmark = [pytest.mark.integration]


def test_a_rerun_after_the_seal_reseals_the_key(zk):
    declared = DeclaredProducers({"sales": (TaskProducer("prod_eu", "load", name="eu"),
                                            TaskProducer("prod_us", "load", name="us"))},
                                 ExplicitKeys({f"k{e}": e for e in range(1, 6)}))
    ledger = EpochLedger(zk, "declared-reseal", owner="declared-producers")
    ledger.create_pipeline(declared.pipeline_config())
    for epoch in range(1, 5):
        for dag in ("prod_eu", "prod_us"):
            producer = dag.split("_")[1]
            stage_vote(ledger, Match("sales", producer, f"k{epoch}"), TaskInstanceId(dag, f"r{epoch}", "load"))
        drain(ledger)
    assert ledger.frontier() == 4

    rerun = TaskInstanceId("prod_eu", "r2-again", "load")
    outcome = stage_vote(ledger, Match("sales", "eu", "k2"), rerun, reseal=True)
    assert outcome.status == "resealed"
    view = ledger.corrections.sealed_version(2, "sales")
    assert view is not None and view.version == 2
    assert StagedVote.voted_by(view.manifests["eu"])["run_id"] == "r2-again"
    assert StagedVote.voted_by(view.manifests["us"])["run_id"] == "r2"  # the other producer's vote stands
    assert ledger.frontier() == 4 and [e.event for e in ledger.history() if e.event == "rollback"] == []
    assert [ledger.epoch_info(e).generation for e in (2, 3, 4)] == [1, 1, 1]
    again = stage_vote(ledger, Match("sales", "eu", "k2"), rerun, reseal=True)
    assert again.status == "repeat"
    assert [v.version for v in ledger.corrections.versions(2, "sales")] == [2]
    assert [c.state for c in ledger.corrections.list()] == ["done"]  # nothing of this pipeline read it


def _declared_sealed(zk, pipeline: str) -> EpochLedger:
    declared = DeclaredProducers({"sales": (TaskProducer("prod_eu", "load", name="eu"),)},
                                 ExplicitKeys({f"k{e}": e for e in range(1, 6)}))
    ledger = EpochLedger(zk, pipeline, owner="declared-producers")
    ledger.create_pipeline(declared.pipeline_config())
    for epoch in (1, 2):
        stage_vote(ledger, Match("sales", "eu", f"k{epoch}"), TaskInstanceId("prod_eu", f"r{epoch}", "load"))
        drain(ledger)
    return ledger


def _gate_events(pipeline: str, change, count: int) -> list[dict]:
    """The events a declared gate (no consumer holding it back) delivers while ``change`` runs."""
    import asyncio

    from airflow_epochs.triggers.declared import DeclaredKeyEventTrigger

    async def scenario() -> list[dict]:
        events: list[dict] = []

        async def collect() -> None:
            async for event in DeclaredKeyEventTrigger(pipeline=pipeline, partition="sales", scope="s").run():
                events.append(event.payload)

        runner = asyncio.create_task(collect())
        while len(events) < 2:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(change)
        for _ in range(600):
            if len(events) >= count:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # room for a duplicate to show
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return events

    return asyncio.run(scenario())


def test_a_declared_gate_delivers_the_resealed_version_of_a_key_once(zk, zk_connection):
    ledger = _declared_sealed(zk, "declared-gate-reseal")

    def rerun() -> None:
        stage_vote(ledger, Match("sales", "eu", "k2"), TaskInstanceId("prod_eu", "r2-again", "load"), reseal=True)

    events = _gate_events("declared-gate-reseal", rerun, 3)
    assert [(e["epoch"], e["version"], e["partition_key"]) for e in events] == [(1, 1, "k1"), (2, 1, "k2"),
                                                                                 (2, 2, "k2")]
    assert events[-1]["dedupe_key"].endswith("/v2") and events[-1]["declared"] is True


def test_a_declared_gate_delivers_a_reopened_key_again_in_its_new_generation(zk, zk_connection):
    """``reopen_on_rerun = true`` rolls the key back; once its staged votes seal it again, the gate
    delivers the key's new generation (the gate's cursor was past it)."""
    ledger = _declared_sealed(zk, "declared-gate-reopen")

    def reopen() -> None:
        outcome = stage_vote(ledger, Match("sales", "eu", "k2"), TaskInstanceId("prod_eu", "r2-again", "load"),
                             reopen=True)
        assert outcome.status == "reopened", outcome
        drain(ledger)

    events = _gate_events("declared-gate-reopen", reopen, 3)
    assert [(e["epoch"], e["generation"], e["partition_key"]) for e in events] == [(1, 1, "k1"), (2, 1, "k2"),
                                                                                    (2, 2, "k2")]
