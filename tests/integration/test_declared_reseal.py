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
