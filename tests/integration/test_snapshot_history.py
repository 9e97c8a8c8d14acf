"""A question about the snapshots sealed before an old epoch gets a true answer after compaction (real
ZooKeeper): with an archive, exactly the answer given before the epochs left ZooKeeper; without one,
that answer or :class:`SnapshotHistoryUnavailable`, never "no snapshot" while one was sealed."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig, SnapshotHistoryUnavailable

pytestmark = [pytest.mark.integration]

PARTITIONS = {"events": ("ingest",), "totals": ("sum",)}


def _run(ledger: EpochLedger, epochs: range, snapshots: set[int]) -> None:
    for epoch in epochs:
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "events", "ingest", {"e": epoch})
        ledger.vote(attempt, "totals", "sum", {"e": epoch},
                    snapshot=f"s3://totals/{epoch}" if epoch in snapshots else None)


def _answer(ledger: EpochLedger, before: int) -> str | None:
    ref = ledger.last_sealed_snapshot("totals", before_epoch=before)
    return None if ref is None else ref.pointer


@pytest.mark.parametrize("storage", [True, False], ids=["archive", "no_archive"])
def test_old_questions_answer_as_before_compaction_or_say_unknown(zk, tmp_path, storage):
    """Snapshots at epochs 3, 6, 9, 15 and 16; compacted through 14 (the pointer names 16 and 15, the
    summary 9). Every ``before_epoch`` from 1 to 18 is asked before and after compacting."""
    archive = str(tmp_path / "storage") if storage else None
    ledger = EpochLedger(zk, "past", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=3, archive=archive))
    _run(ledger, range(1, 18), {3, 6, 9, 15, 16})
    before = {b: _answer(ledger, b) for b in range(1, 19)}
    assert before[4] == "s3://totals/3" and before[9] == "s3://totals/6" and before[15] == "s3://totals/9"
    assert before[1] is None and before[3] is None

    assert ledger.compact().through == 14
    unknown: list[int] = []
    for b in range(1, 19):
        try:
            after = _answer(ledger, b)
        except SnapshotHistoryUnavailable as exc:
            assert not storage, f"before_epoch={b}: {exc}"
            assert exc.partition == "totals" and exc.before_epoch == b
            assert "'past'" in str(exc) and "'totals'" in str(exc) and f"before epoch {b}" in str(exc)
            assert "without an archive" in str(exc)
            unknown.append(b)
            continue
        assert after == before[b], f"before_epoch={b}"
    if storage:
        assert unknown == []
    else:
        # epochs 1..8 left ZooKeeper without a record: every question that reaches them is unknown, and
        # those the summary (epoch 9) or the pointer (15, 16) answer are answered as before
        assert unknown == list(range(2, 10))
        assert _answer(ledger, 12) == "s3://totals/9"
    assert _answer(ledger, 1) is None  # nothing is sealed before the first epoch: certain


def test_the_walk_through_the_archive_is_bounded(zk, tmp_path):
    """Snapshots at epochs 1, 75 and 80, compacted through 78: a question about epoch 74 would have to read
    73 archived epochs to reach epoch 1, more than the 64 a read walks, so it says where it stopped; one
    about epoch 10 reaches it."""
    ledger = EpochLedger(zk, "long", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=2, archive=str(tmp_path / "storage")))
    _run(ledger, range(1, 81), {1, 75, 80})
    assert _answer(ledger, 74) == "s3://totals/1"  # ZooKeeper holds every epoch: the pointer-less walk finds it
    assert ledger.compact().through == 78
    with pytest.raises(SnapshotHistoryUnavailable, match=r"'long'.*'totals'.*before epoch 74.*at most 64") as caught:
        _answer(ledger, 74)
    assert caught.value.history_ends == 73 - 64
    assert _answer(ledger, 10) == "s3://totals/1"
    assert _answer(ledger, 76) == "s3://totals/75"
    assert _answer(ledger, 2) == "s3://totals/1"
    assert _answer(ledger, 1) is None
