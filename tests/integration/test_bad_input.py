"""Bad input catalogue: each mistake gets its own exception naming the bad value, and ZooKeeper is
left exactly as it was (the whole subtree is compared before and after)."""

from __future__ import annotations

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import (
    Attempt,
    AttemptSuperseded,
    ConfigConflict,
    DuplicateVote,
    EpochAlreadySealed,
    EpochLedger,
    EpochNotOpen,
    EpochOutOfOrder,
    InvalidConfig,
    InvalidEpoch,
    InvalidInput,
    InvalidName,
    PayloadTooLarge,
    PipelineConfig,
    PipelineNotFound,
    RollbackRefused,
    UnknownPartition,
    UnknownProducer,
)
from airflow_epochs.coordination.wire.payloads import MAX_PAYLOAD_BYTES

pytestmark = pytest.mark.integration






@pytest.fixture
def world(zk):
    ledger = EpochLedger(zk, "p", owner="me")
    ledger.create_pipeline(PipelineConfig({"flights": ("a", "b"), "weather": ("w",)}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "flights", "a", {"rows": 1})
    ledger.vote(attempt, "weather", "w", {"rows": 2})
    return ledger, attempt


def _unchanged(zk, action, error, match=None):
    before = tree(zk)
    with pytest.raises(error, match=match):
        action()
    assert tree(zk) == before


def test_catalogue_leaves_zookeeper_unchanged(zk, world):
    ledger, attempt = world
    big = {"paths": ["s3://bucket/" + "x" * 100] * (MAX_PAYLOAD_BYTES // 100)}
    cases = [
        (lambda: EpochLedger(zk, "bad/name"), InvalidName, "must not contain '/'"),
        (lambda: EpochLedger(zk, "p", owner="me\n"), InvalidName, "owner"),
        (lambda: ledger.vote(attempt, "flights/x", "a"), InvalidName, "flights/x"),
        (lambda: ledger.vote(attempt, "flights", ".."), InvalidName, "reserved"),
        (lambda: ledger.vote(attempt, "flights", "b", big), PayloadTooLarge, "bytes"),
        (lambda: ledger.vote(attempt, "flights", "b", {"when": object()}), InvalidInput, "not JSON"),
        (lambda: ledger.vote(attempt, "flights", "b", {"nan": float("nan")}), InvalidInput, "not JSON"),
        (lambda: ledger.vote(attempt, "flights", "b", ["not", "a", "mapping"]), InvalidInput, "mapping"),
        (lambda: ledger.vote(attempt, "hotels", "a"), UnknownPartition, "'hotels'"),
        (lambda: ledger.vote(attempt, "flights", "w"), UnknownProducer, "'w'"),
        (lambda: ledger.vote(attempt, "flights", "a", {"rows": 999}), DuplicateVote, "'a'"),
        (lambda: ledger.open_epoch(3), EpochOutOfOrder, r"next epoch to open is 1 \(epoch 1 is open"),
        (lambda: ledger.open_epoch(0), InvalidEpoch, "outside"),
        (lambda: ledger.open_epoch("2"), InvalidEpoch, "must be an integer"),
        (lambda: ledger.open_epoch(True), InvalidEpoch, "must be an integer"),
        (lambda: ledger.current_attempt(5), EpochNotOpen, "epoch 5"),
        (lambda: ledger.rollback(0, reason="   "), RollbackRefused, "needs a reason"),
        (lambda: ledger.rollback(-1, reason="x"), InvalidEpoch, "to_epoch"),
        (lambda: ledger.rollback(1, reason="x"), RollbackRefused, "after the frontier"),
        (lambda: ledger.set_config(PipelineConfig({"f": ("a",)}), from_epoch=1), ConfigConflict, "newest opened"),
        (lambda: PipelineConfig({"f": ()}), InvalidConfig, "no producers"),
        (lambda: PipelineConfig({"f": ("a", "a")}), InvalidConfig, "more than once"),
        (lambda: PipelineConfig({"f": "a"}), InvalidConfig, "list of names"),
        (lambda: PipelineConfig({"f/": ("a",)}), InvalidConfig, "'f/'"),
        (lambda: EpochLedger(zk, "missing").open_epoch(1), PipelineNotFound, "'missing'"),
        (lambda: ledger.vote(Attempt("p", 1, 99, "me", 0, 1), "flights", "b"), AttemptSuperseded, "attempt 99"),
        (lambda: ledger.vote(Attempt("other", 1, 1, "me", 0, 1), "flights", "b"), InvalidEpoch, "'other'"),
    ]
    for action, error, match in cases:
        _unchanged(zk, action, error, match)


def test_sealed_epoch_refuses_reopen_and_votes(zk, world):
    ledger, attempt = world
    ledger.vote(attempt, "flights", "b", {"rows": 3})
    successor = Attempt("p", 1, attempt.token + 1, "other", attempt.config_version, attempt.generation)
    _unchanged(zk, lambda: ledger.open_epoch(1), EpochAlreadySealed, "epoch 1 is sealed")
    _unchanged(zk, lambda: ledger.vote(successor, "flights", "b", {"rows": 3}), EpochAlreadySealed, "sealed")
    _unchanged(zk, lambda: ledger.vote(attempt, "flights", "b", {"rows": 4}), DuplicateVote, "different manifest")
