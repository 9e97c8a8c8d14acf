"""Pipelined voting, the parts that make an epoch cheaper to seal, on a real ZooKeeper: the epoch's
seal sent behind a batch (the vote that completes the epoch reads its outcome instead of sealing in
one more round trip), snapshot pointers read ahead of the sends, and an error while sending one
ballot answered in that ballot's slot while the others are settled."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from airflow_epochs.coordination import (
    AccessDenied,
    Ballot,
    CorruptPayload,
    EpochLedger,
    PipelineConfig,
    VoteResult,
)

pytestmark = [pytest.mark.integration]

SOLE = {"a": ("x",), "b": ("y",), "c": ("z",)}


def _ballots(prefix: str, partitions: str = "abc", snapshot: object = None) -> list[Ballot]:
    return [Ballot(p, SOLE[p][0], {"rows": i}, snapshot=snapshot, request_id=f"{prefix}-{p}")
            for i, p in enumerate(partitions)]


def _sealed_events(ledger: EpochLedger, epoch: int) -> int:
    return sum(1 for e in ledger.history() if e.event == "epoch_sealed" and e.record.epoch == epoch)


def test_the_epoch_seal_sent_behind_the_batch_saves_the_last_round_trip(zk: KazooClient):
    ledger = EpochLedger(zk, "ahead", owner="A")
    ledger.create_pipeline(PipelineConfig(SOLE))
    attempt = ledger.open_epoch(1)
    ledger.config_for(1)
    before = dict(ledger.session.stats)
    results = ledger.vote_many(attempt, _ballots("r"))
    spent = {k: ledger.session.stats[k] - before[k] for k in before}
    assert all(isinstance(r, VoteResult) and r.partition_sealed for r in results), results
    # the last vote completed the epoch and reports it sealed; no vote sealed it in a transaction of its own
    assert [r.epoch_sealed for r in results] == [False, False, True]  # type: ignore[union-attr]
    # two transactions in all: the three votes together (one fence, then each vote's steps), the epoch's seal
    assert spent == {"reads": 0, "transactions": 2, "writes": spent["writes"], "failed_transactions": 0}
    assert ledger.frontier() == 1 and ledger.epoch_info(1).state == "sealed"
    assert _sealed_events(ledger, 1) == 1
    # the epoch's seal was the transaction sent behind the votes (its own request id), not a third one
    # the completing vote sent after its answer came (that one would carry the vote's request id)
    seal = json.loads(zk.get(ledger.paths.epoch_seal(1))[0])
    assert seal["request"] not in {b.request_id for b in _ballots("r")}
    # repeated: the same answers, nothing written again
    again = ledger.vote_many(attempt, _ballots("r"))
    assert all(isinstance(r, VoteResult) and r.partition_sealed and r.epoch_sealed for r in again), again
    assert _sealed_events(ledger, 1) == 1


def test_a_seal_sent_ahead_of_an_incomplete_epoch_writes_nothing_and_the_completing_vote_seals(zk_factory):
    a, b = EpochLedger(zk_factory(), "halves", owner="A"), EpochLedger(zk_factory(), "halves", owner="A")
    a.create_pipeline(PipelineConfig(SOLE))
    attempt = a.open_epoch(1)
    first = a.vote_many(attempt, _ballots("r", "ab"))
    assert [r.epoch_sealed for r in first] == [False, False]  # type: ignore[union-attr]
    assert a.frontier() == 0 and a.epoch_info(1).state == "open"  # the seal sent ahead found the epoch incomplete
    assert _sealed_events(a, 1) == 0
    second = b.vote_many(attempt, _ballots("r", "c"))
    assert isinstance(second[0], VoteResult) and second[0].epoch_sealed
    assert a.frontier() == 1 and _sealed_events(a, 1) == 1


@pytest.mark.parametrize("fault", ["corrupt pointer", "no read access"])
def test_an_error_sending_one_ballot_is_its_answer_and_the_others_are_settled(zk: KazooClient, zk_factory,
                                                                              fault: str):
    """The snapshot pointer of ``b`` cannot be read (corrupt, or its ACL refuses us): ``b``'s vote is
    refused in its own slot, nothing of it written, and the votes sent before and after it are settled."""
    # The ledger votes as an identity of its own: the tests' own identity is the server's superuser, whom no
    # ACL refuses.
    voter = zk_factory(login="voter", password="voter-Secret-1")
    ledger = EpochLedger(voter, "senderr", owner="A")
    ledger.create_pipeline(PipelineConfig(SOLE))
    attempt = ledger.open_epoch(1)
    pointer = ledger.paths.snapshot_pointer("b")
    if fault == "corrupt pointer":
        zk.create(pointer, b"not a pointer", makepath=True)
    else:
        zk.create(pointer, b"{}", makepath=True, acl=[make_digest_acl("someone", "else", all=True)])
    results = ledger.vote_many(attempt, _ballots("r", snapshot={"path": "s3://x"}))
    assert isinstance(results[1], CorruptPayload if fault == "corrupt pointer" else AccessDenied), results
    assert isinstance(results[0], VoteResult) and results[0].partition_sealed
    assert isinstance(results[2], VoteResult) and results[2].partition_sealed
    assert ledger.seal(1, "b") is None  # refused: nothing of it was written
    assert ledger.frontier() == 0


def test_snapshot_pointers_are_read_ahead_of_the_sends(zk: KazooClient):
    """Sole producers leaving snapshots: each pointer is read once (in flight together), and the seals
    move them as blocking votes do."""
    ledger = EpochLedger(zk, "pointers", owner="A")
    ledger.create_pipeline(PipelineConfig(SOLE))
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        before = ledger.session.stats["reads"]
        results = ledger.vote_many(attempt, _ballots(f"e{epoch}", snapshot={"epoch": epoch}))
        assert all(isinstance(r, VoteResult) for r in results), results
        assert ledger.session.stats["reads"] - before == 3
    for partition in SOLE:
        ref = ledger.last_sealed_snapshot(partition)
        assert ref is not None and ref.epoch == 2
        before_two = ledger.last_sealed_snapshot(partition, before_epoch=2)
        assert before_two is not None and before_two.epoch == 1


def test_the_seal_sent_ahead_lost_then_a_rollback_before_the_retry_every_answer_is_true(
        zk: KazooClient, lossy: KazooClient, proxy):
    """The answer of the epoch's seal sent behind the batch is lost (it committed: the epoch sealed),
    and another owner rolls the epoch back before the voter asks again: each vote answers what is on
    record, the completing vote says its attempt was overtaken (rolled back), and the epoch was sealed
    once (one history event), never again by the retry."""
    a, b = EpochLedger(lossy, "lost", owner="A"), EpochLedger(zk, "lost", owner="B")
    a.create_pipeline(PipelineConfig(SOLE))
    attempt = a.open_epoch(1)
    a.config_for(1)
    # the three votes go through in one transaction; the second committed write is the seal sent ahead
    proxy.drop_next_committed_write(skip=1, on_drop=lambda: b.rollback(0, reason="bad input"))
    results = a.vote_many(attempt, _ballots("r"))
    assert proxy.dropped
    assert all(isinstance(r, VoteResult) for r in results), results
    for ballot, result in zip(_ballots("r"), results, strict=True):
        assert result.request == ballot.request_id  # type: ignore[union-attr]
    completing = results[2]
    assert isinstance(completing, VoteResult) and not completing.epoch_sealed
    assert completing.overtaken is not None and completing.overtaken.change == "rolled_back"
    assert _sealed_events(b, 1) == 1
    assert b.frontier() == 0
    again = a.vote_many(attempt, _ballots("r"))
    assert [type(r) for r in again] == [type(r) for r in results]
    assert _sealed_events(b, 1) == 1


def test_a_repeated_sole_vote_is_found_in_its_seal_without_reading_a_vote_znode(zk: KazooClient):
    """A sole producer's vote is kept in its partition's seal and never has a vote znode: looking its
    request id up reads the seal only (a node at the vote's path, which the protocol never writes, is
    not read)."""
    ledger = EpochLedger(zk, "solefind", owner="A")
    ledger.create_pipeline(PipelineConfig(SOLE))
    attempt = ledger.open_epoch(1)
    first = ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="once")
    zk.create(ledger.paths.vote(1, attempt.token, "a", "x"), b"not a vote", makepath=True)
    before = ledger.session.stats["reads"]
    again = ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="once")
    assert again.request == "once" and again.partition_sealed == first.partition_sealed and not again.duplicate
    piped = ledger.vote_many(attempt, [Ballot("a", "x", {"rows": 1}, request_id="once")])
    assert isinstance(piped[0], VoteResult) and piped[0].request == "once"
    assert ledger.session.stats["reads"] > before  # it was looked up (in the seal)


def test_votes_sent_together_one_refused_the_others_are_sent_again_alone(zk: KazooClient):
    """The batch's votes go in one transaction, which ``b``'s refusal (another request voted on ``b``
    with a different manifest) makes fail whole: ``b`` is answered with its refusal and nothing of it is
    written, ``a`` and ``c`` are sent again, each on its own, and seal the epoch."""
    from airflow_epochs.coordination import DuplicateVote

    ledger = EpochLedger(zk, "together", owner="A")
    ledger.create_pipeline(PipelineConfig(SOLE))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "b", "y", {"rows": "other"}, request_id="earlier")
    before = dict(ledger.session.stats)
    results = ledger.vote_many(attempt, _ballots("r"))
    spent = {k: ledger.session.stats[k] - before[k] for k in before}
    assert isinstance(results[1], DuplicateVote), results
    assert isinstance(results[0], VoteResult) and isinstance(results[2], VoteResult), results
    assert results[2].epoch_sealed and ledger.frontier() == 1
    # the shared transaction failed once; a and c committed in transactions of their own
    assert spent["failed_transactions"] >= 1 and spent["transactions"] >= 2
    sealed_b = ledger.seal(1, "b")
    assert sealed_b is not None and sealed_b.manifests == {"y": {"rows": "other"}}  # the refused vote wrote nothing
    assert _sealed_events(ledger, 1) == 1
    # repeated: a and c are found by their request ids, b is refused again
    again = ledger.vote_many(attempt, _ballots("r"))
    assert [type(r) for r in again] == [type(r) for r in results]


def test_votes_too_large_for_one_transaction_are_split(zk: KazooClient):
    """Ballots whose manifests together pass the bytes one transaction may carry go in several
    transactions, each under ZooKeeper's request limit, and every vote is answered and sealed."""
    from airflow_epochs.coordination.protocol.pipelined_votes import MAX_BYTES_TOGETHER

    count = 40
    shape = {f"p{i}": (f"w{i}",) for i in range(count)}
    ledger = EpochLedger(zk, "split", owner="A")
    ledger.create_pipeline(PipelineConfig(shape))
    attempt = ledger.open_epoch(1)
    ledger.config_for(1)
    blob = "x" * 30_000  # near the 32 KB manifest limit: 1.2 MB in all, past what one request may carry
    ballots = [Ballot(f"p{i}", f"w{i}", {"blob": blob, "i": i}, request_id=f"big-{i}") for i in range(count)]
    before = dict(ledger.session.stats)
    results = ledger.vote_many(attempt, ballots)
    spent = {k: ledger.session.stats[k] - before[k] for k in before}
    assert all(isinstance(r, VoteResult) and r.partition_sealed for r in results), results
    assert ledger.frontier() == 1
    expected = -(-count * 30_000 // MAX_BYTES_TOGETHER)  # transactions of votes at least, plus the epoch's seal
    assert spent["failed_transactions"] == 0 and expected + 1 <= spent["transactions"] <= count // 4, spent
    assert all(ledger.seal(1, f"p{i}").manifests[f"w{i}"]["i"] == i for i in range(count))  # type: ignore[union-attr]
