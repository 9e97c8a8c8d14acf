"""A consistent cut and the lineage keys of a pipeline's own partitions (``read_key``: ``nyc:daily``).

Since re-seals, a seal's lineage vector names the partitions of its own pipeline it read, as well as its
upstream pipelines: the running totals of epoch 8 read ``nyc:daily`` at 7 (the snapshot before), a report
of epoch 8 reads ``nyc:daily`` at 8. Read as upstream pipelines, those two keys made the cut at epoch 8
"read different epochs of nyc:daily" and refused it (this test failed so before the fix); they are
ordered by the seals themselves and left out. Upstream pipelines are still checked as before."""

from __future__ import annotations

from airflow_epochs.coordination.recipes.corrections.records import read_key
from airflow_epochs.coordination.recipes.lineage import LineageItem, check_consistency

DAILY = LineageItem("nyc", 8, "daily", {read_key("nyc", "flights"): 8, read_key("nyc", "weather"): 8,
                                         read_key("nyc", "daily"): 7})
REPORT = LineageItem("nyc", 8, "report", {read_key("nyc", "daily"): 8, "raw": 8})


def test_own_partition_reads_at_different_epochs_are_one_cut():
    report = check_consistency([DAILY, REPORT])
    assert report.consistent, report.violations


def test_upstream_pipelines_are_still_checked_beside_them():
    raw = LineageItem("raw", 8, "events")
    ahead = LineageItem("nyc", 8, "report", {read_key("nyc", "daily"): 8, "raw": 9})
    report = check_consistency([DAILY, ahead, raw])
    assert report.violations == ("nyc/report@8 was built on raw epoch 9, but the set holds raw only up to epoch 8",)
    mixed = check_consistency([LineageItem("x", 1, "p", {"raw": 1}), LineageItem("y", 1, "q", {"raw": 2})])
    assert mixed.violations == ("members read different epochs of raw (epoch 1: x/p@1; epoch 2: y/q@1)",)


def test_a_partition_key_of_another_pipeline_is_not_left_out():
    """``read_key`` of another pipeline's partition is no read of the member's own: checked as before."""
    first = LineageItem("a", 3, "p", {read_key("other", "x"): 2})
    second = LineageItem("b", 3, "q", {read_key("other", "x"): 3})
    assert not check_consistency([first, second]).consistent
