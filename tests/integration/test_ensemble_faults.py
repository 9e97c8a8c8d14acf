"""The ledger on a 3-node ensemble: ZooKeeper servers die in the middle of voting."""

from __future__ import annotations

import time

import pytest

from airflow_epochs.coordination import (
    CoordinationUnavailable,
    EpochLedger,
    OutcomeUnknown,
    PipelineConfig,
    PipelinePaths,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.ensemble]

PRODUCERS = tuple(f"p{i}" for i in range(1, 7))


def _seal_nodes(client, epoch):
    """(generation, partition) of every seal written for ``epoch``."""
    paths = PipelinePaths("ens")
    found = []
    for name in client.get_children(paths.epoch(epoch)):
        if name.startswith("g-"):
            generation = int(name[2:])
            found += [(generation, partition) for partition in client.get_children(paths.seals(epoch, generation))]
    return found


def test_leader_then_follower_die_mid_vote_and_quorum_loss_writes_nothing(ensemble):
    client = ensemble.client(timeout=10, start_timeout=20)
    try:
        ledger = EpochLedger(client, "ens", owner="coordinator", op_timeout=30)
        ledger.create_pipeline(PipelineConfig({"out": PRODUCERS}))
        attempt = ledger.open_epoch(1)
        ledger.vote(attempt, "out", "p1", {"n": 1})
        ledger.vote(attempt, "out", "p2", {"n": 2})

        leader = ensemble.leader()
        ensemble.kill(leader)
        ledger.vote(attempt, "out", "p3", {"n": 3})  # waits out the election, then commits
        ensemble.restart(leader)

        follower = ensemble.followers()[0]
        ensemble.kill(follower)
        ledger.vote(attempt, "out", "p4", {"n": 4})
        ledger.vote(attempt, "out", "p5", {"n": 5})
        ensemble.restart(follower)
        assert ledger.vote(attempt, "out", "p6", {"n": 6}).epoch_sealed

        assert _seal_nodes(client, 1) == [(1, "out")]
        seal = ledger.seal(1, "out")
        assert seal.manifests == {p: {"n": i} for i, p in enumerate(PRODUCERS, start=1)}
        events = [e.event for e in ledger.history() if e.record.epoch == 1]
        assert events.count("partition_sealed") == 1 and events.count("epoch_sealed") == 1
        assert ledger.frontier() == 1

        # Quorum lost: two of three servers down. The last vote cannot commit: it fails clearly, as
        # unavailable (nothing sent) or outcome unknown (sent, answer lost), and writes nothing.
        attempt2 = ledger.open_epoch(2)
        for i, producer in enumerate(PRODUCERS[:-1], start=1):
            ledger.vote(attempt2, "out", producer, {"n": i})
        survivors = [i for i in range(3) if i != ensemble.leader()]
        ensemble.kill(ensemble.leader())
        ensemble.kill(survivors[0])
        impatient = EpochLedger(client, "ens", owner="coordinator", op_timeout=4)
        started = time.monotonic()
        with pytest.raises((CoordinationUnavailable, OutcomeUnknown),
                           match=r"not reachable or has no quorum|could not"):
            impatient.vote(attempt2, "out", "p6", {"n": 6}, request_id="vote-p6")
        assert time.monotonic() - started < 20
        for index in range(3):
            if not ensemble.members[index].running():
                ensemble.restart(index)
        ensemble.wait_serving()
        ledger = EpochLedger(client, "ens", owner="coordinator", op_timeout=30)
        assert _seal_nodes(client, 2) == []
        assert ledger.frontier() == 1
        # the same request, repeated once the quorum is back, completes the epoch exactly once
        assert ledger.vote(attempt2, "out", "p6", {"n": 6}, request_id="vote-p6").epoch_sealed
        assert _seal_nodes(client, 2) == [(1, "out")]
        assert ledger.frontier() == 2
    finally:
        client.stop()
