"""bench/producers_rows.py: the declared-producers rows from what one deployment shows (pure arithmetic; the
figures themselves come from ``bash scripts/bench.sh --only producers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def rows(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import common
    import producers_rows

    monkeypatch.setattr(common, "ROWS", [])  # this test's rows only (compare() appends to it)
    return producers_rows, common


SIDE_ARGS = ("ours", "peer", ("a", "b"), "pipe")


def _snapshot(producers_rows, starts, pending=None):
    return producers_rows.Snapshot(starts=starts, ends={"k1": 100.0, "k2": 200.0, "k3": 300.0},
                                   stages={"ours": {"k1": (100.5, 101.0, 101.5)},
                                           "peer": {"k1": (100.1, 100.6, 101.0)}},
                                   seals={"k1": 99.9}, pending=pending or {})


def test_duplicates_missed_and_latency_per_scenario_with_stable_ids(rows):
    producers_rows, common = rows
    side = producers_rows.Side(*SIDE_ARGS)
    # ours: one run per complete key; the peer: k1 twice, k2 never (two pending runs: #71070), one for the
    # incomplete k3
    snap = _snapshot(producers_rows, {"ours": {"k1": [102.0], "k2": [203.0]},
                                      "peer": {"k1": [101.0, 150.0], "k3": [301.0]}}, pending={"k2": 2})
    producers_rows.report("plain", side, snap, ["k1", "k2"], ["k3"], "note")
    by_id = {row.id: row for row in common.ROWS}
    assert (by_id["producers_duplicate_runs[plain]"].ours, by_id["producers_duplicate_runs[plain]"].peer) == (0, 2)
    assert (by_id["producers_missed_keys[plain]"].ours, by_id["producers_missed_keys[plain]"].peer) == (0, 1)
    assert "pending runs {'k2': 2}" in by_id["producers_missed_keys[plain]"].note
    latency = by_id["producers_latency_s[plain]"]
    assert (latency.ours, latency.peer) == (2.5, 1.0)  # medians over keys of first run - last success
    event = by_id["producers_latency_event_s[plain]"]
    assert (event.ours, event.peer) == pytest.approx((0.5, 0.1))
    assert by_id["producers_seal_to_event_s[plain]"].ours == pytest.approx(0.6)  # the triggerer's delivery


def test_a_rerun_counts_the_runs_it_added(rows):
    producers_rows, common = rows
    side = producers_rows.Side(*SIDE_ARGS)
    before = _snapshot(producers_rows, {"ours": {"k1": [102.0]}, "peer": {"k1": [101.0]}})
    after = _snapshot(producers_rows, {"ours": {"k1": [102.0]}, "peer": {"k1": [101.0, 180.0]}})
    producers_rows.report_rerun("rerun_after_consumption", side, before, after, ["k1", "k2"], "note")
    (row,) = common.ROWS
    assert (row.id, row.ours, row.peer) == ("producers_duplicate_runs[rerun_after_consumption]", 0, 1)
