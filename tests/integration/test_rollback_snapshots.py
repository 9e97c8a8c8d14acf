"""A rollback never makes a live partition's last sealed snapshot disappear (real ZooKeeper).

After a rollback to epoch T the snapshot pointer names the newest snapshot sealed at or before T,
wherever it is kept: in an epoch retained in ZooKeeper, in a compacted epoch kept in full (without
storage) or in the archive. A rollback below the compaction point is refused and writes nothing.
"""

from __future__ import annotations

import json

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import EpochLedger, PipelineConfig, RollbackRefused

pytestmark = [pytest.mark.integration]

PARTITIONS = {"events": ("ingest",), "totals": ("sum",)}


def _epoch(ledger: EpochLedger, epoch: int, *, snapshot: bool) -> None:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "events", "ingest", {"e": epoch})
    ledger.vote(attempt, "totals", "sum", {"e": epoch}, snapshot=f"s3://totals/{epoch}" if snapshot else None)


def _pointer(ledger: EpochLedger, **kwargs: int) -> str | None:
    ref = ledger.last_sealed_snapshot("totals", **kwargs)
    return None if ref is None else ref.pointer


@pytest.mark.parametrize("storage", [True, False], ids=["archive", "no_archive"])
def test_a_rollback_to_the_compaction_point_keeps_the_older_snapshot(zk, tmp_path, storage):
    """Snapshots at epochs 2, 7 and 8; compacted through 5 (the pointer names 8 and 7 only, so epoch 2
    was not pinned by it). A rollback to exactly 5 answers the snapshot of epoch 2, and a retry of
    epoch 6 starts from it; a rollback to 4 (below the compaction point) is refused, writing nothing."""
    archive = str(tmp_path / "storage") if storage else None
    ledger = EpochLedger(zk, "undo", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=3, archive=archive))
    for epoch in range(1, 9):
        _epoch(ledger, epoch, snapshot=epoch in (2, 7, 8))
    report = ledger.compact()
    assert report.through == 5
    assert _pointer(ledger) == "s3://totals/8"

    before = tree(zk, ledger.paths.base)
    with pytest.raises(RollbackRefused, match=r"cannot roll back to 4\b.*nothing was written"):
        ledger.rollback(4, reason="below the compaction point")
    assert tree(zk, ledger.paths.base) == before

    assert ledger.rollback(5, reason="bad input from epoch 6 on") == [6, 7, 8]
    assert ledger.frontier() == 5
    assert _pointer(ledger) == "s3://totals/2"
    assert _pointer(ledger, before_epoch=6) == "s3://totals/2"

    # the retry: epoch 6 reopens as a new generation and its producer starts from epoch 2's snapshot
    attempt = ledger.open_epoch(6)
    assert attempt.generation == 2
    ref = ledger.last_sealed_snapshot("totals", before_epoch=attempt.epoch, producer="sum")
    assert (ref.epoch, ref.pointer) == (2, "s3://totals/2")
    ledger.vote(attempt, "events", "ingest", {"e": 6})
    assert ledger.vote(attempt, "totals", "sum", {"e": 6, "retry": True}, snapshot="s3://totals/6b").epoch_sealed
    assert _pointer(ledger) == "s3://totals/6b"
    assert _pointer(ledger, before_epoch=6) == "s3://totals/2"
    # compaction afterwards keeps the snapshot readable (kept in full, or read from the archive)
    for epoch in range(7, 12):
        _epoch(ledger, epoch, snapshot=False)
    ledger.compact()
    assert _pointer(ledger, before_epoch=6) == "s3://totals/2"
    assert _pointer(ledger) == "s3://totals/6b"


@pytest.mark.parametrize("storage", [True, False], ids=["archive", "no_archive"])
def test_a_rollback_to_the_compaction_point_keeps_a_pinned_snapshot(zk, tmp_path, storage):
    """The only early snapshot (epoch 1) is pinned when epochs up to 6 are compacted; two later
    snapshots (10, 11) then move the pointer past it. A rollback to 6 names epoch 1's snapshot again."""
    archive = str(tmp_path / "storage") if storage else None
    ledger = EpochLedger(zk, "pinned", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=3, archive=archive))
    for epoch in range(1, 10):
        _epoch(ledger, epoch, snapshot=epoch == 1)
    assert ledger.compact().through == 6
    for epoch in (10, 11):
        _epoch(ledger, epoch, snapshot=True)
    assert _pointer(ledger) == "s3://totals/11"
    assert ledger.rollback(6, reason="bad input") == [7, 8, 9, 10, 11]
    assert _pointer(ledger) == "s3://totals/1"
    attempt = ledger.open_epoch(7)
    assert ledger.last_sealed_snapshot("totals", before_epoch=attempt.epoch).pointer == "s3://totals/1"


def test_a_rollback_between_the_compaction_point_and_the_pointer_finds_a_retained_snapshot(zk):
    """Snapshots at 3, 7, 8 and 9, compacted through 6: a rollback to 6 names epoch 3 (compacted and
    kept), one to 7 (retained) names epoch 7; the partition without snapshots has no pointer."""
    ledger = EpochLedger(zk, "between", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=3))
    for epoch in range(1, 10):
        _epoch(ledger, epoch, snapshot=epoch in (3, 7, 8, 9))
    assert ledger.compact().through == 6
    assert ledger.rollback(7, reason="bad input") == [8, 9]
    assert _pointer(ledger) == "s3://totals/7"
    assert ledger.last_sealed_snapshot("events") is None
    for epoch in (8, 9):
        _epoch(ledger, epoch, snapshot=True)
    assert ledger.rollback(6, reason="worse input") == [7, 8, 9]
    assert _pointer(ledger) == "s3://totals/3"


def test_a_summary_without_the_compacted_snapshot_refuses_a_rollback_that_would_lose_it(zk):
    """A compaction summary written before it recorded snapshots (its ``snapshots`` fields stripped, as an
    older version wrote it) cannot tell where the newest snapshot at or before the target is: the
    rollback is refused, naming the partition and the target, and writes nothing. A rollback the pointer
    answers still goes through."""
    ledger = EpochLedger(zk, "legacy", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=3))
    for epoch in range(1, 9):
        _epoch(ledger, epoch, snapshot=epoch in (2, 7, 8))
    assert ledger.compact().through == 5
    raw, _ = zk.get(ledger.paths.archive)
    doc = json.loads(raw)
    assert doc.pop("snapshots")["totals"][0] == 2 and doc.pop("snapshots_from") == 0
    zk.set(ledger.paths.archive, json.dumps(doc).encode())
    before = tree(zk, ledger.paths.base)
    with pytest.raises(RollbackRefused, match=r"'totals'.*roll(ing)? back to 5.*nothing was written"):
        ledger.rollback(5, reason="bad input")
    assert tree(zk, ledger.paths.base) == before
    assert ledger.rollback(7, reason="bad input") == [8]
    assert _pointer(ledger) == "s3://totals/7"


def test_a_partition_retired_and_added_back_rolls_back_to_its_retired_snapshot(zk, tmp_path):
    """``gone`` leaves snapshots at 1 and 2, is removed from epoch 3 on and retired to the archive, then
    comes back from epoch 6 and leaves snapshots at 7 and 8. A rollback to 5 (the compaction point)
    points it at epoch 2's snapshot, kept only in its retirement record."""
    archive = str(tmp_path / "storage")
    ledger = EpochLedger(zk, "returns", owner="o")
    both = {"gone": ("a",), "keep": ("a",)}
    ledger.create_pipeline(PipelineConfig(both, retain_epochs=1, archive=archive))
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=archive), from_epoch=3)
    retired: list[str] = []
    for epoch in range(1, 6):
        attempt = ledger.open_epoch(epoch)
        if epoch < 3:
            ledger.vote(attempt, "gone", "a", {"e": epoch}, snapshot=f"s3://gone/{epoch}")
        ledger.vote(attempt, "keep", "a", {"e": epoch})
        retired += ledger.compact().retired
    assert retired == ["gone"] and not zk.exists(ledger.paths.snapshot_pointer("gone"))
    ledger.set_config(PipelineConfig(both, retain_epochs=1, archive=archive), from_epoch=6)
    for epoch in (6, 7, 8):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "gone", "a", {"e": epoch}, snapshot=f"s3://gone/{epoch}" if epoch > 6 else None)
        ledger.vote(attempt, "keep", "a", {"e": epoch})
        if epoch == 6:
            assert ledger.compact().through == 5
    assert ledger.last_sealed_snapshot("gone").pointer == "s3://gone/8"
    assert ledger.rollback(5, reason="bad input") == [6, 7, 8]
    raw, _ = zk.get(ledger.paths.snapshot_pointer("gone"))
    assert json.loads(raw)["current"]["epoch"] == 2  # set, not left to a fallback
    assert ledger.last_sealed_snapshot("gone").pointer == "s3://gone/2"
    attempt = ledger.open_epoch(6)
    assert ledger.last_sealed_snapshot("gone", before_epoch=attempt.epoch).pointer == "s3://gone/2"
