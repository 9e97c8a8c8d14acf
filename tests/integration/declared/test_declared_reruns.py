"""A cleared re-run of a declared producer told from a retry by its success mark, on a real ZooKeeper.

A try that staged its vote and was killed before its success (no mark) is retried: ``repeat``, nothing
changes. Once a try reported success (``mark_succeeded``), a later try of the same task instance after
the seal is a cleared re-run: reported once in the history (``producer_rerun``), however often its own
try is killed and retried, and with ``reopen`` the key is rolled back once per re-run and sealed again.
"""

from __future__ import annotations

import pytest
from declared_sales import DECLARED

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.declared.reruns import mark_succeeded, succeeded_try
from airflow_epochs.coordination.declared.votes import StageOutcome, TaskInstanceId, drain, stage_vote
from airflow_epochs.coordination.wire.declared import Match
from airflow_epochs.coordination.wire.events import ProducerRerun

pytestmark = pytest.mark.integration

KEY = "2026-01-01"


@pytest.fixture
def sealed(zk) -> EpochLedger:
    """Key 1 sealed, every producer's try 1 marked as succeeded."""
    ledger = EpochLedger(zk, "declared", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config())
    for producer in ("eu", "us", "returns"):
        outcome = _try(ledger, producer, 1)
        assert outcome.status == "staged"
        mark_succeeded(ledger, outcome.staged_path(ledger.paths), _ti(producer).to_json(), 1)
    assert ledger.frontier() == 1
    return ledger


def _ti(producer: str) -> TaskInstanceId:
    return TaskInstanceId(f"prod_{producer}", "scheduled__2026-01-01", "load")


def _try(ledger: EpochLedger, producer: str, try_number: int, *, reopen: bool = False) -> StageOutcome:
    outcome = stage_vote(ledger, Match("sales", producer, KEY), _ti(producer), reopen=reopen, try_number=try_number)
    drain(ledger)
    return outcome


def _reruns(ledger: EpochLedger) -> list[ProducerRerun]:
    return [e.record for e in ledger.history() if isinstance(e.record, ProducerRerun)]


def test_a_retry_after_a_kill_before_success_is_not_a_rerun(zk):
    ledger = EpochLedger(zk, "declared", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config())
    for producer in ("eu", "us", "returns"):
        assert _try(ledger, producer, 1).status == "staged"  # try 1 voted, then was killed: no mark
    assert ledger.frontier() == 1
    retried = _try(ledger, "eu", 2, reopen=True)
    assert (retried.status, retried.cleared_after) == ("repeat", None)
    assert ledger.seal(1, "sales").generation == 1 and _reruns(ledger) == []


def test_a_cleared_rerun_is_reported_once_and_changes_nothing_without_reopen(sealed):
    ledger = sealed
    first = _try(ledger, "eu", 2)
    assert (first.status, first.cleared_after) == ("rerun_after_seal", 1)
    again = _try(ledger, "eu", 3)  # try 2 killed before its success: the same re-run
    assert (again.status, again.cleared_after) == ("rerun_after_seal", 1)
    reruns = _reruns(ledger)
    assert [(r.epoch, r.producer, r.key, r.cleared, r.succeeded_try, r.try_number, r.reopened) for r in reruns] == [
        (1, "eu", KEY, True, 1, 2, False)]
    assert reruns[0].task_instance == _ti("eu").to_json()
    assert ledger.seal(1, "sales").generation == 1 and ledger.frontier() == 1


def test_a_cleared_rerun_reopens_the_key_once_per_rerun_with_reopen(sealed):
    ledger = sealed
    path = StageOutcome("declared", "sales", "eu", KEY, 1, "", {}).staged_path(ledger.paths)
    first = _try(ledger, "eu", 2, reopen=True)
    assert (first.status, first.cleared_after) == ("reopened", 1)
    assert ledger.frontier() == 1 and ledger.seal(1, "sales").generation == 2  # rolled back, sealed again
    # try 2 killed after its rollback, before its success: try 3 is the same re-run, no second rollback
    assert _try(ledger, "eu", 3, reopen=True).status == "reopened"
    assert ledger.seal(1, "sales").generation == 2
    mark_succeeded(ledger, path, _ti("eu").to_json(), 3)
    assert succeeded_try(ledger, path, _ti("eu").to_json()) == 3
    mark_succeeded(ledger, path, _ti("eu").to_json(), 2)  # a late mark of an older try never lowers it
    assert succeeded_try(ledger, path, _ti("eu").to_json()) == 3
    # cleared again after try 3 succeeded: a new re-run, a new generation
    assert _try(ledger, "eu", 4, reopen=True).cleared_after == 3
    assert ledger.seal(1, "sales").generation == 3
    assert [(r.succeeded_try, r.try_number, r.reopened) for r in _reruns(ledger)] == [(1, 2, True), (3, 4, True)]


def test_the_epochs_page_shows_the_rerun_beside_the_attempts(sealed):
    from airflow_epochs.views.pipeline import PipelineState

    _try(sealed, "us", 2, reopen=True)
    reader = EpochLedger(sealed.client, "declared", owner="epochs-ui")
    state = PipelineState(reader)
    assert state.history.wait_loaded(30)
    detail = state.epoch_detail(1)
    assert detail is not None
    reruns = [a for a in detail.attempts if a.event == "producer re-run"]
    assert [(a.attempt, a.owner) for a in reruns] == [(0, "prod_us.load (scheduled__2026-01-01)")]
    assert reruns[0].note == "sales/us key 2026-01-01: cleared after try 1 succeeded (try 2); the key was reopened"


def test_a_cleared_rerun_reseals_the_partition_once_with_reseal(sealed):
    ledger = sealed
    first = stage_vote(ledger, Match("sales", "eu", KEY), _ti("eu"), reseal=True, try_number=2)
    assert (first.status, first.cleared_after) == ("resealed", 1)
    view = ledger.corrections.sealed_version(1, "sales")
    assert view is not None and view.version == 2
    # try 2 killed before its success: try 3 is the same re-run, no second version
    assert stage_vote(ledger, Match("sales", "eu", KEY), _ti("eu"), reseal=True, try_number=3).status == "resealed"
    assert [v.version for v in ledger.corrections.versions(1, "sales")] == [2] and ledger.frontier() == 1
    assert len(_reruns(ledger)) == 1
