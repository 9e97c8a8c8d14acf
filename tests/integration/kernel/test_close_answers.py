"""A close that makes the epoch's seal answers from what its own commit wrote (the outcome table:
the sealed epoch, or the same marked ``overtaken=rolled_back``), whatever another owner does right
after it: a rollback, or a rollback and a reopening of the epoch. The interleaving is injected exactly
between the close's sealing transaction and its answer, on a real ZooKeeper."""

from __future__ import annotations

import pytest
from outcome_oracle import dead_vote

from airflow_epochs.coordination import EpochAlreadySealed, EpochLedger, PipelineConfig
from airflow_epochs.coordination.protocol import closing

CONFIG = PipelineConfig({"daily": ("a", "b")})


def _after_the_seal(monkeypatch: pytest.MonkeyPatch, then) -> list[bool]:
    """Run ``then`` right after the close's transaction that seals the epoch commits (the seal of the
    dead voter's partition, which seals the epoch with it), before the close answers."""
    real = closing.seal_partition
    sealed: list[bool] = []

    def seal_then_interleave(*args, **kwargs):
        progress = real(*args, **kwargs)
        sealed.append(progress.sealed_at is not None)
        if progress.sealed_at is not None:
            then()
        return progress

    monkeypatch.setattr(closing, "seal_partition", seal_then_interleave)
    return sealed


def _epoch_two_waiting_for_its_close(zk) -> tuple[EpochLedger, EpochLedger, object]:
    """Epoch 1 sealed; epoch 2 opened by A, both votes in, the last voter dead before it sealed."""
    a, b = EpochLedger(zk, "close", owner="A"), EpochLedger(zk, "close", owner="B")
    a.create_pipeline(CONFIG)
    first = a.open_epoch(1)
    a.vote(first, "daily", "a")
    a.vote(first, "daily", "b")
    attempt = a.open_epoch(2)
    a.vote(attempt, "daily", "a")
    dead_vote(zk, a, attempt, "daily", "b")
    return a, b, attempt


@pytest.mark.integration
def test_a_close_that_seals_answers_the_sealed_epoch_though_a_rollback_lands_right_after(zk, monkeypatch):
    a, b, attempt = _epoch_two_waiting_for_its_close(zk)
    outcomes = _after_the_seal(monkeypatch, lambda: b.rollback(1, reason="bad input", request_id="rb-B"))
    info = a.close_epoch(attempt, request_id="close-A-2")
    assert outcomes == [True]  # this close made the seal
    assert (info.epoch, info.state, info.attempt, info.generation) == (2, "sealed", attempt.token, 1)
    assert info.sealed_partitions == ("daily",) and info.sealed_at is not None
    assert a.epoch_info(2).state == "rolled_back"  # and the rollback did land after it
    again = a.close_epoch(attempt, request_id="close-A-2")  # the repeat finds the commit, overtaken since
    assert again.state == "sealed" and again.overtaken is not None and again.overtaken.change == "rolled_back"


@pytest.mark.integration
def test_a_close_that_seals_never_answers_with_the_reopened_epoch(zk, monkeypatch):
    a, b, attempt = _epoch_two_waiting_for_its_close(zk)

    def rollback_and_reopen() -> None:
        b.rollback(1, reason="bad input", request_id="rb-B")
        b.open_epoch(2, request_id="open-B-2")

    _after_the_seal(monkeypatch, rollback_and_reopen)
    info = a.close_epoch(attempt, request_id="close-A-2")
    assert (info.state, info.attempt, info.generation, info.owner) == ("sealed", attempt.token, 1, "A")
    reopened = a.epoch_info(2)
    assert (reopened.state, reopened.generation, reopened.owner) == ("open", 2, "B")


@pytest.mark.integration
def test_a_close_of_an_epoch_another_attempt_sealed_names_that_seal(zk):
    a, b = EpochLedger(zk, "close", owner="A"), EpochLedger(zk, "close", owner="B")
    a.create_pipeline(CONFIG)
    stopped = a.open_epoch(1)
    taken = b.open_epoch(1, takeover=True)
    b.vote(taken, "daily", "a")
    b.vote(taken, "daily", "b")
    with pytest.raises(EpochAlreadySealed) as refused:
        a.close_epoch(stopped)
    assert (refused.value.sealed_by_attempt, refused.value.sealed_by_owner, refused.value.generation) == \
        (taken.token, "B", 1)
