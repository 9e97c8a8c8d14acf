"""Pipelined voting (``EpochLedger.vote_many``): every vote's transaction is sent before the first
answer is awaited, and each vote is answered exactly as the blocking ``vote`` answers it: the same
results, the same refusals, the same request-id lookups after a lost answer."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from outcome_oracle import doc

from airflow_epochs.coordination import (
    AttemptSuperseded,
    Ballot,
    EpochLedger,
    PipelineConfig,
    UnknownProducer,
    VoteResult,
)

pytestmark = [pytest.mark.integration]

SHAPE = {"a": ("x", "y"), "b": ("z",), "c": ("u", "v", "w")}
BALLOTS = [("a", "x"), ("b", "z"), ("c", "u"), ("a", "y"), ("c", "v"), ("c", "w")]


def _ballots(prefix: str) -> list[Ballot]:
    return [Ballot(p, q, {"rows": i}, upstream={"up": i}, request_id=f"{prefix}-{p}-{q}")
            for i, (p, q) in enumerate(BALLOTS)]


def _plain(result: VoteResult) -> tuple[object, ...]:
    return (result.epoch, result.partition, result.producer, result.attempt, result.partition_sealed,
            result.epoch_sealed, result.duplicate)


def test_pipelined_votes_answer_as_blocking_votes_do(zk):
    pipelined, blocking = EpochLedger(zk, "piped", owner="A"), EpochLedger(zk, "blocking", owner="A")
    for ledger in (pipelined, blocking):
        ledger.create_pipeline(PipelineConfig(SHAPE))
    piped_attempt, blocking_attempt = pipelined.open_epoch(1), blocking.open_epoch(1)
    results = pipelined.vote_many(piped_attempt, _ballots("r"))
    expected = [blocking.vote(blocking_attempt, b.partition, b.producer, b.manifest, upstream=b.upstream,
                              request_id=b.request_id) for b in _ballots("r")]
    assert all(isinstance(r, VoteResult) for r in results), results
    assert [_plain(r) for r in results] == [_plain(r) for r in expected]  # type: ignore[arg-type]
    assert [r.request for r in results] == [b.request_id for b in _ballots("r")]  # type: ignore[union-attr]
    assert pipelined.frontier() == 1
    for partition in SHAPE:
        assert pipelined.seal(1, partition).manifests == blocking.seal(1, partition).manifests
    # the same request ids again: answered as blocking repeats are (sealed now), nothing applied twice
    events = len(pipelined.history())
    again = pipelined.vote_many(piped_attempt, _ballots("r"))
    repeats = [blocking.vote(blocking_attempt, b.partition, b.producer, b.manifest, upstream=b.upstream,
                             request_id=b.request_id) for b in _ballots("r")]
    assert [_plain(r) for r in again] == [_plain(r) for r in repeats]  # type: ignore[arg-type]
    assert all(r.partition_sealed and r.epoch_sealed for r in again)  # type: ignore[union-attr]
    assert len(pipelined.history()) == events


def test_a_bad_ballot_is_refused_before_any_vote_is_sent(zk):
    ledger = EpochLedger(zk, "bad", owner="A")
    ledger.create_pipeline(PipelineConfig(SHAPE))
    attempt = ledger.open_epoch(1)
    with pytest.raises(UnknownProducer, match="'nobody'"):
        ledger.vote_many(attempt, [Ballot("a", "x"), Ballot("a", "nobody")])
    assert zk.get_children(ledger.paths.vote_counter(1, attempt.token, "a")) == []


def test_votes_of_a_superseded_attempt_are_each_refused(zk):
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(PipelineConfig(SHAPE))
    attempt = a.open_epoch(1)
    b.open_epoch(1, takeover=True)
    results = a.vote_many(attempt, _ballots("late"))
    assert all(isinstance(r, AttemptSuperseded) for r in results), results


@pytest.mark.parametrize("lost", ["votes", "epoch seal"])
def test_a_lost_answer_in_the_pipeline_then_a_takeover_every_answer_is_true(zk, lossy: KazooClient, proxy, lost):
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(PipelineConfig(SHAPE))
    attempt = a.open_epoch(1)
    a.config_for(1)  # the configuration is cached: the votes are the first writes through the proxy
    # The batch's six votes go in one transaction, then the epoch's seal behind them. The answer of one
    # of them is lost (the connection is cut), and B takes the epoch over before A asks again.
    proxy.drop_next_committed_write(skip=0 if lost == "votes" else 1, on_drop=lambda: b.open_epoch(1, takeover=True))
    results = a.vote_many(attempt, _ballots("r"))
    assert proxy.dropped
    for ballot, result in zip(_ballots("r"), results, strict=True):
        on_record = _on_record(zk, a, attempt.token, ballot)
        if isinstance(result, VoteResult):
            assert on_record, result
            assert result.request == ballot.request_id
        else:
            assert isinstance(result, AttemptSuperseded) and not on_record, result
    assert isinstance(results[1], VoteResult)  # "b" is its sole producer's: the vote is the seal, in before B
    if lost == "votes":  # every vote's answer was lost, and found: committed, and overtaken since
        assert all(isinstance(r, VoteResult) and r.overtaken is not None and r.overtaken.change == "superseded"
                   for r in results), results
    # a repeat of each request answers the same
    again = a.vote_many(attempt, _ballots("r"))
    assert [type(r) for r in again] == [type(r) for r in results]


def _on_record(zk: KazooClient, ledger: EpochLedger, token: int, ballot: Ballot) -> bool:
    """Whether the ballot's request id is on record: its vote znode, or its vote kept in the seal."""
    vote = doc(zk, ledger.paths.vote(1, token, ballot.partition, ballot.producer))
    if vote is None:
        seal = doc(zk, ledger.paths.seal(1, 1, ballot.partition)) or {}
        kept = seal.get("vote") or (seal.get("votes") or {}).get(ballot.producer)
        vote = kept if seal.get("attempt") == token else None
    return vote is not None and vote["request"] == ballot.request_id


def test_a_transaction_sent_ahead_is_never_reported_as_nothing_written(proxy, lossy, zk):
    """A transaction sent ahead (``Call.send``) whose answer is lost, on a connection that stays down
    past the call's deadline, may have committed: the call says outcome unknown, never "nothing was
    written" (here it did commit)."""
    import time

    from airflow_epochs.coordination import CoordinationUnavailable, OutcomeUnknown
    from airflow_epochs.coordination.base.session import Session
    from airflow_epochs.coordination.base.steps import Create

    lossy.ensure_path("/ahead")
    session = Session.of(lossy)
    proxy.drop_next_committed_write(on_drop=lambda: proxy.block(30))
    call = session.begin("sent-ahead", timeout=3.0)
    steps = [Create("/ahead/one", b"x")]
    pending = call.send(steps)
    give_up = time.monotonic() + 10
    while lossy.state == "CONNECTED" and time.monotonic() < give_up:  # the cut seen: the call waits for it
        time.sleep(0.01)
    with pytest.raises(OutcomeUnknown) as unknown:
        session.call(lambda c: c.settle(steps, pending), what="sent ahead", started=call)
    assert not isinstance(unknown.value, CoordinationUnavailable) and unknown.value.request_id == "sent-ahead"
    proxy.unblock()
    assert zk.exists("/ahead/one") is not None  # it had committed: "nothing was written" would have lied


def test_an_answer_already_here_is_read_even_after_the_deadline(zk):
    """A pipelined batch settles its votes one after the other: an answer that arrived in time is read,
    not turned into an unknown outcome because settling the earlier ones took the rest of the deadline."""
    import time

    from airflow_epochs.coordination.base.session import Session
    from airflow_epochs.coordination.base.steps import Create

    zk.ensure_path("/late")
    call = Session.of(zk).begin("late-read", timeout=0.5)
    steps = [Create("/late/one", b"x")]
    pending = call.send(steps)
    pending.wait(5)
    time.sleep(max(0.0, call.deadline - time.monotonic()) + 0.05)
    results = call.settle(steps, pending)
    assert results == ["/late/one"] and call.wrote and not call.sent and call.awaiting == 0
