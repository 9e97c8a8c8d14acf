"""The epoch ledger against a real ZooKeeper: ordering, fencing, unanimous seals, frontier, snapshots,
rollback and history."""

from __future__ import annotations

import threading

import pytest

from airflow_epochs.coordination import (
    AttemptSuperseded,
    DuplicateVote,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochIncomplete,
    EpochLedger,
    EpochNotOpen,
    EpochOutOfOrder,
    PartitionAlreadySealed,
    PipelineConfig,
    RollbackRefused,
)

CONFIG = PipelineConfig({"flights": ("ingest_a", "ingest_b"), "weather": ("ingest_w",)})


@pytest.fixture
def ledger(zk):
    led = EpochLedger(zk, "demo", owner="deploy-a")
    led.create_pipeline(CONFIG)
    return led


def seal_epoch(ledger, epoch, *, snapshot=None):
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "flights", "ingest_a", {"rows": epoch})
    ledger.vote(attempt, "flights", "ingest_b", {"rows": epoch * 2}, snapshot=snapshot)
    result = ledger.vote(attempt, "weather", "ingest_w", {"rows": 1})
    assert result.epoch_sealed
    return attempt


def test_unanimous_seal_advances_frontier_in_order(ledger):
    assert ledger.frontier() == 0
    attempt = ledger.open_epoch(1)
    first = ledger.vote(attempt, "flights", "ingest_a", {"rows": 10})
    assert not first.partition_sealed and ledger.seal(1, "flights") is None
    second = ledger.vote(attempt, "flights", "ingest_b", {"rows": 5})
    assert second.partition_sealed and not second.epoch_sealed
    assert ledger.frontier() == 0
    with pytest.raises(EpochIncomplete) as missing:
        ledger.close_epoch(attempt)
    assert missing.value.missing == ["weather"]
    third = ledger.vote(attempt, "weather", "ingest_w", {"rows": 24})
    assert third.epoch_sealed
    assert ledger.frontier() == 1
    seal = ledger.seal(1, "flights")
    assert seal is not None and seal.manifests == {"ingest_a": {"rows": 10}, "ingest_b": {"rows": 5}}
    assert ledger.close_epoch(attempt).state == "sealed"  # idempotent


def test_epochs_open_only_after_previous_sealed(ledger):
    with pytest.raises(EpochOutOfOrder, match="next epoch to open is 1"):
        ledger.open_epoch(2)
    attempt = ledger.open_epoch(1)
    with pytest.raises(EpochOutOfOrder):
        ledger.open_epoch(2)
    ledger.vote(attempt, "flights", "ingest_a")
    ledger.vote(attempt, "flights", "ingest_b")
    ledger.vote(attempt, "weather", "ingest_w")
    assert ledger.open_epoch(2).epoch == 2
    with pytest.raises(EpochAlreadySealed):
        ledger.open_epoch(1)


def test_resume_takeover_and_zombie_fencing(zk, ledger):
    attempt = ledger.open_epoch(1, request_id="open-1")
    assert ledger.open_epoch(1, request_id="open-1") == attempt  # the same request resumes its attempt
    other = EpochLedger(zk, "demo", owner="deploy-b")
    with pytest.raises(EpochAlreadyOpen) as held:
        other.open_epoch(1)
    assert held.value.owner == "deploy-a"
    ledger.vote(attempt, "flights", "ingest_a", {"rows": 1})
    successor = other.open_epoch(1, takeover=True)
    assert successor.token == attempt.token + 1
    with pytest.raises(AttemptSuperseded):
        ledger.vote(attempt, "flights", "ingest_b", {"rows": 1})
    # the zombie's vote never counts: the successor needs both producers again
    assert not other.vote(successor, "flights", "ingest_b", {"rows": 2}).partition_sealed
    assert other.vote(successor, "flights", "ingest_a", {"rows": 2}).partition_sealed
    seal = other.seal(1, "flights")
    assert seal.attempt == successor.token
    assert seal.manifests == {"ingest_a": {"rows": 2}, "ingest_b": {"rows": 2}}


def test_a_same_named_replacement_never_shares_the_zombies_token(zk, ledger):
    """Two processes of one deployment (the same owner name): the second opening supersedes the first
    instead of resuming it, so the first (maybe a zombie) is fenced off."""
    zombie = ledger.open_epoch(1, request_id="try-1")
    replacement = EpochLedger(zk, "demo", owner="deploy-a").open_epoch(1, request_id="try-2")
    assert replacement.token == zombie.token + 1
    with pytest.raises(AttemptSuperseded):
        ledger.vote(zombie, "weather", "ingest_w")
    # repeating the zombie's request does not bring it back, and writes nothing: it answers with the
    # attempt that request opened, flagged as superseded since
    again = ledger.open_epoch(1, request_id="try-1")
    assert again.token == zombie.token and again.overtaken is not None
    assert (again.overtaken.change, again.overtaken.current) == ("superseded", replacement.token)
    assert ledger.epoch_info(1).attempt == replacement.token


def test_votes_are_idempotent_and_duplicates_refused(zk, ledger):
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "flights", "ingest_a", {"rows": 1})
    again = ledger.vote(attempt, "flights", "ingest_a", {"rows": 1})
    assert again.duplicate
    with pytest.raises(DuplicateVote):
        ledger.vote(attempt, "flights", "ingest_a", {"rows": 2})
    ledger.vote(attempt, "flights", "ingest_b", {"rows": 1})
    assert ledger.vote(attempt, "flights", "ingest_b", {"rows": 1}).duplicate
    with pytest.raises(DuplicateVote):
        ledger.vote(attempt, "flights", "ingest_b", {"rows": 3})
    # a later attempt cannot re-vote a partition sealed by an earlier one: seals are immutable
    successor = EpochLedger(zk, "demo", owner="deploy-b").open_epoch(1, takeover=True)
    with pytest.raises(PartitionAlreadySealed):
        ledger.vote(successor, "flights", "ingest_b", {"rows": 1})
    assert ledger.seal(1, "flights").attempt == attempt.token


def test_abort_then_new_attempt(ledger):
    attempt = ledger.open_epoch(1)
    ledger.abort_attempt(attempt, reason="spark driver died")
    with pytest.raises(AttemptSuperseded):
        ledger.vote(attempt, "weather", "ingest_w")
    retry = ledger.open_epoch(1)
    assert retry.token == attempt.token + 1


def test_snapshot_of_previous_sealed_epoch(ledger):
    seal_epoch(ledger, 1, snapshot="s3://bucket/totals/epoch=1")
    seal_epoch(ledger, 2, snapshot="s3://bucket/totals/epoch=2")
    attempt = ledger.open_epoch(3)
    ledger.vote(attempt, "flights", "ingest_a")
    ledger.vote(attempt, "flights", "ingest_b", snapshot="s3://bucket/totals/epoch=3-unsealed-attempt")
    # epoch 3 is not sealed (weather missing): a retry of 3 must get epoch 2's snapshot
    ref = ledger.last_sealed_snapshot("flights", before_epoch=3)
    assert (ref.epoch, ref.pointer) == (2, "s3://bucket/totals/epoch=2")
    assert ledger.last_sealed_snapshot("flights").epoch == 2
    assert ledger.last_sealed_snapshot("flights", before_epoch=2).pointer == "s3://bucket/totals/epoch=1"
    assert ledger.last_sealed_snapshot("weather") is None


def test_rollback_is_recorded_and_reopens_new_generation(zk, ledger):
    seal_epoch(ledger, 1)
    seal_epoch(ledger, 2)
    seal_epoch(ledger, 3)
    with pytest.raises(RollbackRefused):
        ledger.rollback(3, reason="nothing to do")
    assert ledger.rollback(1, reason="bad weather feed") == [2, 3]
    assert ledger.frontier() == 1
    assert ledger.seal(2, "flights") is None
    with pytest.raises(EpochOutOfOrder):
        ledger.open_epoch(3)
    again = ledger.open_epoch(2)
    assert again.generation == 2 and again.token == 2
    # the old generation's seal is still there, as the record of what was rolled back
    assert zk.exists(ledger.paths.seal(2, 1, "flights"))
    events = [e.event for e in ledger.history()]
    assert "rollback" in events and events[-1] == "epoch_opened"
    zxids = [e.zxid for e in ledger.history()]
    assert zxids == sorted(zxids)


def test_epoch_without_partitions_is_sealed_by_close(zk):
    led = EpochLedger(zk, "orchestration-only", owner="a")
    led.create_pipeline(PipelineConfig({}))
    attempt = led.open_epoch(1)
    assert led.close_epoch(attempt).state == "sealed"
    assert led.frontier() == 1


def test_frontier_watch_sees_every_advance(ledger):
    seen = []
    changed = threading.Event()

    def on_frontier(value):
        seen.append(value)
        changed.set()

    ledger.watch_frontier(on_frontier)
    seal_epoch(ledger, 1)
    seal_epoch(ledger, 2)
    for _ in range(50):
        if seen[-1:] == [2]:
            break
        changed.wait(0.1)
        changed.clear()
    assert seen[0] == 0 and seen[-1] == 2


def test_epoch_not_open(ledger):
    with pytest.raises(EpochNotOpen):
        ledger.current_attempt(1)
