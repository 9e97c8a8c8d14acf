"""Votes fold into their seal: a sealed partition of several producers is one znode, and every
answer about its votes (a repeated vote, a lost answer with another owner acting in between,
``vote_of``, ``seal``) is what it was while the vote znodes existed."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from airflow_epochs.coordination import (
    DuplicateVote,
    EpochAlreadySealed,
    EpochLedger,
    PartitionAlreadySealed,
    PipelineConfig,
)
from airflow_epochs.coordination.wire import payloads

pytestmark = [pytest.mark.integration]

CONFIG = PipelineConfig({"a": ("x", "y"), "b": ("z",)})


def subtree(zk: KazooClient, top: str) -> list[str]:
    out = [top]
    for child in zk.get_children(top):
        out += subtree(zk, f"{top}/{child}")
    return out


def test_a_sealed_epoch_keeps_one_znode_per_partition_and_answers_as_before(zk):
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(CONFIG)
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "a", "x", {"rows": 1}, snapshot="s3://x", upstream={"up": 3}, request_id="vx")
    before = ledger.vote_of(1, "a", "x")
    assert zk.exists(ledger.paths.vote(1, attempt.token, "a", "x")) is not None
    ledger.vote(attempt, "a", "y", {"rows": 2}, request_id="vy")
    ledger.vote(attempt, "b", "z", {"rows": 3}, request_id="vz")
    paths = ledger.paths
    names = {p.removeprefix(paths.epoch(1)) for p in subtree(zk, paths.epoch(1))}
    # the epoch record, its seal, the attempt, the opening's seal counter and one seal per partition
    assert names == {"", "/sealed", f"/a-{attempt.token:010d}", f"/g-{attempt.generation}",
                     f"/g-{attempt.generation}/a", f"/g-{attempt.generation}/b"}
    assert ledger.vote_of(1, "a", "x") == before
    vote_y = ledger.vote_of(1, "a", "y")
    assert vote_y is not None and (vote_y.manifest, vote_y.request, vote_y.attempt) == ({"rows": 2}, "vy", 1)
    seal = ledger.seal(1, "a")
    assert seal.producers == ("x", "y") and dict(seal.manifests) == {"x": {"rows": 1}, "y": {"rows": 2}}
    assert dict(seal.snapshots) == {"x": "s3://x"} and dict(seal.upstream) == {"up": 3}
    assert ledger.last_sealed_snapshots("a")["x"].pointer == "s3://x"
    doc = payloads.decode("seal", zk.get(paths.seal(1, attempt.generation, "a"))[0])
    assert doc["votes"]["x"]["request"] == "vx" and doc["votes"]["y"]["request"] == "vy"


def test_a_repeated_vote_after_the_fold_gets_the_same_answer(zk):
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(CONFIG)
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="vx")
    last = ledger.vote(attempt, "a", "y", {"rows": 2}, request_id="vy")
    assert last.partition_sealed and not last.epoch_sealed
    first_again = ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="vx")
    assert (first_again.partition_sealed, first_again.request, first_again.duplicate) == (True, "vx", False)
    assert ledger.vote(attempt, "a", "y", {"rows": 2}, request_id="vy") == last
    # an identical vote of another request is a duplicate, as before the fold; a different one is refused
    same = ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="other")
    assert same.duplicate and same.partition_sealed
    before = zk.get(ledger.paths.seal(1, attempt.generation, "a"))
    with pytest.raises(DuplicateVote):
        ledger.vote(attempt, "a", "x", {"rows": 99}, request_id="different")
    assert zk.get(ledger.paths.seal(1, attempt.generation, "a")) == before  # nothing was written


def test_a_vote_for_a_partition_sealed_before_a_takeover_is_refused(zk):
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(CONFIG)
    attempt = a.open_epoch(1)
    a.vote(attempt, "a", "x")
    a.vote(attempt, "a", "y")
    taken = b.open_epoch(1, takeover=True)
    with pytest.raises(PartitionAlreadySealed):
        b.vote(taken, "a", "x", {"rows": 5}, request_id="new")
    repeat = a.vote(attempt, "a", "y", request_id=a.vote_of(1, "a", "y", attempt=1).request)
    assert a.vote_of(1, "a", "y") is None  # not a vote of the current attempt, as before the fold
    assert repeat.partition_sealed and repeat.overtaken is not None and repeat.overtaken.change == "superseded"


def test_seal_answer_lost_then_a_takeover_the_repeat_finds_the_folded_vote(zk, lossy, proxy):
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(CONFIG)
    attempt = a.open_epoch(1)
    a.vote(attempt, "a", "x", request_id="vx")
    # the completing vote commits, then the seal transaction that folds the votes commits and its
    # answer is lost; B takes the epoch over before A asks again
    proxy.drop_next_committed_write(skip=1, on_drop=lambda: b.open_epoch(1, takeover=True))
    result = a.vote(attempt, "a", "y", request_id="vy")
    assert proxy.dropped
    assert result.partition_sealed and not result.epoch_sealed and result.request == "vy"
    assert result.overtaken is not None and (result.overtaken.change, result.overtaken.current) == ("superseded", 2)
    assert zk.exists(a.paths.vote(1, attempt.token, "a", "y")) is None  # folded into the seal
    again = a.vote(attempt, "a", "y", request_id="vy")
    assert again == result and again.overtaken == result.overtaken


def test_vote_answer_lost_then_another_owner_closes_the_repeat_is_true(zk, lossy, proxy):
    a = EpochLedger(lossy, "p", owner="A")
    a.create_pipeline(CONFIG)
    attempt = a.open_epoch(1)
    a.vote(attempt, "a", "x", request_id="vx")
    a.vote(attempt, "b", "z", request_id="vz")
    closer = EpochLedger(zk, "p", owner="A")
    # the completing vote commits and its answer is lost; another process of the same owner closes the
    # epoch (it writes the seal the voter did not, folding the votes) before the voter asks again
    proxy.drop_next_committed_write(on_drop=lambda: closer.close_epoch(attempt))
    result = a.vote(attempt, "a", "y", request_id="vy")
    assert proxy.dropped
    assert (result.partition_sealed, result.epoch_sealed, result.overtaken) == (True, True, None)
    assert a.vote(attempt, "a", "y", request_id="vy") == result
    assert a.vote_of(1, "a", "y").request == "vy"


def test_large_manifests_keep_their_vote_znodes(zk):
    big = {"files": ["f" * 1000] * 25}  # about 25 KB: two of them do not fit one seal
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x", "y", "w")}))
    attempt = ledger.open_epoch(1)
    for producer in ("x", "y", "w"):
        ledger.vote(attempt, "a", producer, big, request_id=f"v{producer}")
    assert zk.exists(ledger.paths.vote(1, attempt.token, "a", "x")) is not None
    assert ledger.seal(1, "a").manifests == {"w": big, "x": big, "y": big}
    assert ledger.vote(attempt, "a", "x", big, request_id="vx").partition_sealed


def test_closing_while_the_last_vote_folds_its_partition_is_not_refused(zk, zk_factory, monkeypatch):
    """``close_epoch`` reads the sealed partitions, then the vote counters of the others. A last vote
    committing in between seals its partition and folds its counter away: the close must read again
    and seal the epoch, not refuse it as missing votes."""
    from airflow_epochs.coordination.protocol import seals

    closer = EpochLedger(zk, "race", owner="o")
    closer.create_pipeline(PipelineConfig({"shared": ("x", "y")}))
    attempt = closer.open_epoch(1)
    closer.vote(attempt, "shared", "x", {"rows": 1})
    voter = EpochLedger(zk_factory(), "race", owner="o")
    original = seals.incomplete_partitions
    calls = []

    def last_vote_lands_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not calls:
            voter.vote(attempt, "shared", "y", {"rows": 2})  # seals "shared" and folds its counter
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(seals, "incomplete_partitions", last_vote_lands_first)
    info = closer.close_epoch(attempt)
    assert info.state == "sealed" and closer.frontier() == 1 and calls  # the race did happen


def test_vote_answer_lost_then_the_epoch_leaves_zookeeper_the_repeat_is_answered_from_the_archive(
        zk, lossy, proxy, tmp_path):
    """The completing vote commits and its answer is lost; before the voter asks again another process
    closes the epoch, opens the next one and compacts (default window of an archived pipeline: the
    sealed epoch leaves ZooKeeper whole). The lookup and every repeat find the vote in the archive."""
    config = PipelineConfig({"a": ("x", "y"), "b": ("z",)}, archive=str(tmp_path))
    a = EpochLedger(lossy, "p", owner="A")
    a.create_pipeline(config)
    attempt = a.open_epoch(1)
    a.vote(attempt, "a", "x", request_id="vx")
    a.vote(attempt, "b", "z", request_id="vz")
    other = EpochLedger(zk, "p", owner="A")

    def close_and_archive() -> None:
        other.close_epoch(attempt)
        other.open_epoch(2)
        assert other.compact().archived == (1,)

    proxy.drop_next_committed_write(on_drop=close_and_archive)
    result = a.vote(attempt, "a", "y", request_id="vy")
    assert proxy.dropped
    assert zk.exists(a.paths.epoch(1)) is None  # the epoch left ZooKeeper before the lookup
    assert (result.partition_sealed, result.epoch_sealed, result.overtaken, result.request) == (True, True, None, "vy")
    assert a.vote(attempt, "a", "y", request_id="vy") == result
    assert a.vote(attempt, "a", "x", request_id="vx").partition_sealed
    with pytest.raises(EpochAlreadySealed, match="archive holds no vote of 'y' under request 'other'"):
        a.vote(attempt, "a", "y", request_id="other")
    assert a.vote_of(1, "a", "y").request == "vy"


def test_vote_answer_lost_then_a_takeover_seals_and_archives_the_repeat_is_true(zk, lossy, proxy, tmp_path):
    """A's vote commits under attempt 1 and its answer is lost; B takes the epoch over, seals it under
    attempt 2 and compacts it into the archive. A's lookup finds its vote in the archive: committed,
    but under an attempt that did not seal (never counted), as it would have while ZooKeeper held it."""
    config = PipelineConfig({"a": ("x", "y"), "b": ("z",)}, archive=str(tmp_path))
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(config)
    attempt = a.open_epoch(1)

    def take_over_seal_and_archive() -> None:
        taken = b.open_epoch(1, takeover=True)
        for partition, producer in (("a", "x"), ("a", "y"), ("b", "z")):
            b.vote(taken, partition, producer, {"by": "B"})
        b.open_epoch(2)
        assert b.compact().archived == (1,)

    proxy.drop_next_committed_write(on_drop=take_over_seal_and_archive)
    result = a.vote(attempt, "a", "x", {"by": "A"}, request_id="ax")
    assert proxy.dropped
    assert zk.exists(a.paths.epoch(1)) is None
    assert (result.partition_sealed, result.epoch_sealed, result.request) == (False, False, "ax")
    assert result.overtaken is not None and (result.overtaken.change, result.overtaken.current) == ("superseded", 2)
    assert a.vote(attempt, "a", "x", {"by": "A"}, request_id="ax") == result
    assert a.vote_of(1, "a", "x", attempt=attempt.token).manifest == {"by": "A"}
    assert a.seal(1, "a").manifests["x"] == {"by": "B"}
