"""Partition deadlines against a real ZooKeeper: seal-time statistics learned from the producers'
own votes, predictions with bounded reads, declared deadlines refused before any write, and exactly
one alert per late (epoch, partition) across watchers, threads and processes (one killed -9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_epochs.coordination import (
    DeadlineSpec,
    EpochCalendar,
    EpochLedger,
    InvalidInput,
    PipelineConfig,
    UnknownConsumer,
    UnknownPartition,
)
from airflow_epochs.coordination.recipes.deadlines.paths import DeadlinePaths

pytestmark = [pytest.mark.integration]

WORKER = Path(__file__).resolve().parents[2] / "helpers" / "deadline_worker.py"
CONFIG = PipelineConfig({"daily": ("fast", "slow"), "side": ("solo",)})
# Seconds after opening each producer voted in the recorded history: fast ~10 s, slow 100..119 s.
FAST = [10.0 + (e % 3) for e in range(1, 21)]
SLOW = [100.0 + (e * 7) % 20 for e in range(1, 21)]


class Clock:
    """A settable wall clock for building history quickly (votes record ``voted_at`` from it)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def build_history(zk, epochs: int = 20, *, start: float | None = None) -> EpochLedger:
    """A pipeline whose first ``epochs`` epochs sealed with known vote delays (``FAST``, ``SLOW``)."""
    clock = Clock(start if start is not None else time.time() - 86_400)
    past = EpochLedger(zk, "sales", owner="history", clock=clock)
    past.create_pipeline(CONFIG)
    for epoch in range(1, epochs + 1):
        opened = clock.now
        attempt = past.open_epoch(epoch)
        clock.now = opened + FAST[(epoch - 1) % 20]
        past.vote(attempt, "daily", "fast", {"e": epoch})
        clock.now = opened + 5
        past.vote(attempt, "side", "solo", {"e": epoch})
        clock.now = opened + SLOW[(epoch - 1) % 20]
        assert past.vote(attempt, "daily", "slow", {"e": epoch}).epoch_sealed
        clock.now = opened + 1000
    return past


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def test_a_pipeline_without_history_says_so(zk):
    ledger = EpochLedger(zk, "fresh", owner="a")
    ledger.create_pipeline(CONFIG)
    ledger.open_epoch(1)
    forecast = ledger.deadlines().predicted_seal(1, "daily")
    assert forecast.status == "too_little_history"
    assert forecast.typical_at is None and forecast.late_at is None
    assert [(m.producer, m.samples, m.typical_at) for m in forecast.missing] == [("fast", 0, None), ("slow", 0, None)]
    assert ledger.deadlines().predicted_seal(2, "daily").status == "not_open"
    with pytest.raises(UnknownPartition):
        ledger.deadlines().predicted_seal(1, "nope")


def test_prediction_learned_from_20_epochs_names_the_missing_producer(zk):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="live")
    attempt = live.open_epoch(21)
    live.vote(attempt, "daily", "fast", {"e": 21})
    # [START deadlines_predict]
    forecast = live.deadlines().predicted_seal(21, "daily", quantile=0.9)
    # forecast.status: "predicted" (or "too_little_history", "sealed", ...); typical_at / late_at: epoch
    # seconds; forecast.missing: each missing producer's predicted vote and last vote
    # [END deadlines_predict]
    opened = live.epoch_info(21).opened_at
    assert forecast.status == "predicted"
    assert [m.producer for m in forecast.missing] == ["slow"]
    assert forecast.typical_at == pytest.approx(opened + quantile(SLOW, 0.5))
    assert forecast.late_at == pytest.approx(opened + quantile(SLOW, 0.9))
    slow = forecast.missing[0]
    assert slow.samples == 20 and slow.last_voted_at is not None and slow.last_voted_at < opened
    stats = live.deadlines().statistics("daily")
    assert stats.through == 20 and len(stats.producers["fast"].samples) == 20
    live.vote(attempt, "daily", "slow", {"e": 21})
    assert live.deadlines().predicted_seal(21, "daily").status == "sealed"


def test_a_prediction_reads_a_fixed_number_of_znodes_however_long_the_history(zk_factory):
    counts = []
    for epochs in (10, 40):
        zk = zk_factory()
        past = build_history(zk, epochs)
        deadlines = past.deadlines(window=8)
        past.open_epoch(epochs + 1)
        deadlines.predicted_seal(epochs + 1, "daily")  # folds the newest window once
        before = past.session.stats["reads"]
        forecast = deadlines.predicted_seal(epochs + 1, "daily")
        counts.append(past.session.stats["reads"] - before)
        assert forecast.status == "predicted" and forecast.missing[0].samples == 8
        zk.delete(past.paths.base, recursive=True)
    assert counts[0] == counts[1] <= 8, counts


def test_archived_epochs_are_folded_through_the_archive(zk, tmp_path):
    clock = Clock(time.time() - 86_400)
    past = EpochLedger(zk, "archived", owner="history", clock=clock)
    past.create_pipeline(PipelineConfig({"daily": ("fast", "slow")}, archive=str(tmp_path / "archive")))
    for epoch in range(1, 8):
        opened = clock.now
        attempt = past.open_epoch(epoch)
        clock.now = opened + 3
        past.vote(attempt, "daily", "fast", {})
        clock.now = opened + 30 + epoch
        past.vote(attempt, "daily", "slow", {})
        clock.now = opened + 100
    assert past.compact().compacted  # every sealed epoch left ZooKeeper for the archive
    assert zk.exists(past.paths.epoch(3)) is None
    stats = past.deadlines().statistics("daily")
    assert [s.since_open for s in stats.producers["slow"].samples] == pytest.approx([31, 32, 33, 34, 35, 36, 37])


def test_bad_deadlines_are_refused_before_any_write(zk):
    ledger = EpochLedger(zk, "bad", owner="a")
    ledger.create_pipeline(CONFIG)
    for kwargs, word in ((dict(slack=-1), "slack"), (dict(quantile=0), "quantile"), (dict(quantile=1.0), "quantile"),
                         (dict(quantile=1.5), "quantile"), (dict(mode="fixed", delta=-5, anchor="opened"), "delta"),
                         (dict(mode="soon"), "mode"), (dict(mode="fixed"), "calendar")):
        with pytest.raises(InvalidInput, match=word):
            DeadlineSpec("daily", **kwargs)
    with pytest.raises(UnknownPartition, match="nope"):
        ledger.deadlines().declare(DeadlineSpec("nope"))
    with pytest.raises(UnknownConsumer, match="ghost"):
        ledger.deadlines().declare(DeadlineSpec("daily", declarer="ghost"))
    with pytest.raises(InvalidInput, match="window"):
        ledger.deadlines(window=0)
    with pytest.raises(InvalidInput, match="quantile"):
        ledger.deadlines().predicted_seal(1, "daily", quantile=2)
    assert zk.exists(ledger.paths.deadlines) is None and zk.exists(ledger.paths.seal_stats_dir) is None
    ledger.consumer("reports").register()
    spec = ledger.deadlines().declare(DeadlineSpec("daily", declarer="reports", slack=30))
    assert ledger.deadlines().specs("daily") == [spec]


def test_late_partition_raises_one_alert_naming_the_late_producer_and_its_late_seal(zk):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    deadlines = live.deadlines()
    deadlines.declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=1.5))
    # [START deadlines_other_specs]
    # a consumer's own deadline: the 0.9 quantile of the predicted seal plus 30 s
    live.consumer("reports").register()
    deadlines.declare(DeadlineSpec("daily", mode="predicted", quantile=0.9, slack=30, declarer="reports"))
    # a fixed one: 2 hours after the epoch's data interval ends (the calendar says when)
    calendar = EpochCalendar(datetime(2026, 1, 1, tzinfo=UTC), timedelta(days=1))
    DeadlineSpec("daily", mode="fixed", delta=timedelta(hours=2), calendar=calendar)
    # [END deadlines_other_specs]
    attempt = live.open_epoch(21)
    live.vote(attempt, "daily", "fast", {"e": 21})
    verdict = deadlines.wait(21, "daily", timeout=10)
    fired = time.time()
    assert verdict.state == "late" and verdict.deliver
    assert verdict.deadline_at == pytest.approx(live.epoch_info(21).opened_at + 1.5)
    assert 0 <= fired - verdict.deadline_at < 1.0
    alert = verdict.alert
    assert [m.producer for m in alert.missing] == ["slow"]
    assert alert.missing[0].typical_at is not None and alert.missing[0].last_voted_at is not None
    deadlines.delivered(alert)
    again = deadlines.check(21, "daily")
    assert again.state == "late" and not again.deliver and again.alert.delivered_at is not None
    live.vote(attempt, "daily", "slow", {"e": 21})
    sealed = deadlines.check(21, "daily")
    assert sealed.state == "sealed_late" and sealed.alert.late_by > 0
    deadlines.check(21, "daily")
    kinds = [e.event for e in live.history()]
    assert kinds.count("deadline_missed") == 1 and kinds.count("sealed_late") == 1
    missed = next(e for e in live.history() if e.event == "deadline_missed")
    assert missed.detail["missing"] == ["slow"] and missed.detail["partition"] == "daily"
    from airflow_epochs.views.timeline import lanes, render_svg, spans

    drawn = spans(live.history(), [21])
    [late] = [s for s in drawn if s.lane == "late daily"]
    assert late.start == pytest.approx(verdict.deadline_at) and late.end == pytest.approx(sealed.alert.sealed_at)
    assert "waiting for slow" in late.note and "s late" in late.note
    assert lanes(drawn)[-1] == "late daily" and 'data-lane="late daily"' in render_svg(drawn)


def test_a_partition_sealed_in_time_raises_no_alert(zk):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=2.0))
    attempt = live.open_epoch(21)
    live.vote(attempt, "daily", "fast", {})
    threading.Timer(0.5, lambda: live.vote(attempt, "daily", "slow", {})).start()
    started = time.monotonic()
    verdict = live.deadlines().wait(21, "daily", timeout=10)
    assert verdict.state == "in_time" and verdict.alert is None
    assert time.monotonic() - started < 1.5  # woken by the seal, not at the deadline
    time.sleep(1.8)
    assert live.deadlines().check(21, "daily").state == "in_time"
    assert zk.exists(DeadlinePaths(live.paths).late_alert(21, 1, "daily")) is None
    assert "deadline_missed" not in [e.event for e in live.history()]


def test_predicted_deadline_with_slack(zk):
    start = time.time() - 21 * 1000 - 1  # epoch 21 opens at the end of this history, about now
    build_history(zk, start=start)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    live.deadlines().declare(DeadlineSpec("side", mode="predicted", quantile=0.5, slack=0.5))
    live.open_epoch(21)
    verdict = live.deadlines().check(21, "side")
    opened = live.epoch_info(21).opened_at
    assert verdict.state == "waiting" and verdict.deadline_at == pytest.approx(opened + 5 + 0.5)


def test_two_watchers_racing_in_threads_raise_one_alert(zk_factory):
    zk = zk_factory()
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="opener")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=1.0))
    live.open_epoch(21)
    verdicts = []
    barrier = threading.Barrier(4)

    def watch(name: str) -> None:
        ledger = EpochLedger(zk_factory(), "sales", owner=name)
        barrier.wait()
        verdicts.append(ledger.deadlines().wait(21, "daily", timeout=3))

    threads = [threading.Thread(target=watch, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(v.state for v in verdicts) == ["late"] * 4
    assert sum(v.deliver for v in verdicts) == 1
    assert len({v.alert.raised_by for v in verdicts}) == 1
    assert [e.event for e in live.history()].count("deadline_missed") == 1


def _worker(zk_server, hosts: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), hosts, "sales", "21", "daily", mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=zk_server.env())


def test_one_alert_across_processes_when_the_alerting_one_is_killed_9(zk, zk_server, zk_chroot):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="opener")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=1.0))
    live.open_epoch(21)
    hosts = zk_server.address + zk_chroot
    first = _worker(zk_server, hosts, "hang")  # raises the alert, holds its delivery, never delivers
    second = None
    try:
        line = first.stdout.readline()
        assert line, first.stderr.read()
        assert json.loads(line) == {"state": "late", "deliver": True, "delivered": False}
        second = _worker(zk_server, hosts, "deliver")
        line = second.stdout.readline()
        assert line, second.stderr.read()
        assert json.loads(line) == {"state": "late", "deliver": False, "delivered": False}
        assert live.deadlines().alert(21, "daily").delivered_at is None
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        line = second.stdout.readline()
        assert json.loads(line) == {"state": "late", "deliver": True, "delivered": True}, second.stderr.read()
        assert time.monotonic() - killed < 15  # the session timeout (2 s) and a little
        second.wait(30)
    finally:
        for proc in (first, second):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(10)
    alert = live.deadlines().alert(21, "daily")
    assert alert is not None and alert.delivered_at is not None
    assert [e.event for e in live.history()].count("deadline_missed") == 1


def test_a_watch_started_before_its_epoch_opens_waits_for_it(zk):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=0.5))
    assert live.deadlines().check(21, "daily").state == "not_open"
    threading.Timer(0.5, lambda: live.open_epoch(21)).start()
    verdict = live.deadlines().wait(21, "daily", timeout=10)
    assert verdict.state == "late" and verdict.deliver
    assert [m.producer for m in verdict.alert.missing] == ["fast", "slow"]


def test_a_calendar_deadline_passed_before_the_epoch_opened_names_every_producer(zk):
    ledger = EpochLedger(zk, "cal", owner="w")
    ledger.create_pipeline(CONFIG)
    calendar = EpochCalendar(datetime.now(UTC) - timedelta(hours=3), timedelta(hours=1))
    ledger.deadlines().declare(DeadlineSpec("daily", mode="fixed", delta=60, calendar=calendar))
    verdict = ledger.deadlines().check(1, "daily")  # epoch 1 ended two hours ago and never opened
    assert verdict.state == "late" and verdict.deadline_at == pytest.approx(
        (calendar.span(1)[1] + timedelta(seconds=60)).timestamp())
    assert [m.producer for m in verdict.alert.missing] == ["fast", "slow"]
    assert ledger.deadlines().check(3, "daily").state == "not_open"  # epoch 3's interval has not ended


def test_status_and_the_epoch_detail_show_the_prediction_and_the_late_mark(zk):
    from airflow_epochs.views.pipeline import PipelineState
    from airflow_epochs.views.status import pipeline_status, render

    build_history(zk)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=0.2))
    attempt = live.open_epoch(21)
    live.vote(attempt, "daily", "fast", {})
    time.sleep(0.3)
    stats = DeadlinePaths(live.paths).seal_stats("daily")
    before = zk.get(stats)[1].version if zk.exists(stats) else None
    detail = PipelineState(live).epoch_detail(21, history=False)
    daily = next(p for p in detail.partitions if p.partition == "daily")
    assert daily.deadline["late"] and daily.deadline["state"] == "late" and not daily.deadline["alerted"]
    assert daily.deadline["status"] == "predicted" and daily.deadline["typical_at"] is not None
    assert [m["producer"] for m in daily.deadline["missing"]] == ["slow"]
    side = next(p for p in detail.partitions if p.partition == "side")
    assert side.deadline["status"] == "predicted" and side.deadline["deadline_at"] is None
    # reading wrote nothing: no alert, no statistics folded for the page
    assert zk.exists(DeadlinePaths(live.paths).late_alert(21, 1, "daily")) is None
    assert (zk.get(DeadlinePaths(live.paths).seal_stats("daily"))[1].version
            if zk.exists(DeadlinePaths(live.paths).seal_stats("daily")) else None) == before
    text = render(pipeline_status(live))
    assert "LATE waiting for slow" in text and "predicted seal (typical / late)" in text
    live.deadlines().check(21, "daily")  # a watcher raises the alert
    live.vote(attempt, "daily", "slow", {})
    text = render(pipeline_status(live, recent=1))
    assert "SEALED LATE by" in text and "(alerted)" in text


def test_a_rolled_back_epoch_reopened_gets_its_own_alert(zk):
    build_history(zk)
    live = EpochLedger(zk, "sales", owner="watcher-a")
    live.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=0.3))
    attempt = live.open_epoch(21)
    live.vote(attempt, "daily", "fast", {})
    first = live.deadlines().wait(21, "daily", timeout=10)
    assert first.state == "late" and first.deliver and first.alert.generation == 1
    live.deadlines().delivered(first.alert)
    live.rollback(20, reason="bad input")
    assert live.deadlines().check(21, "daily").state == "not_open"  # the old alert is the old opening's
    reopened = []
    threading.Timer(0.8, lambda: reopened.append(live.open_epoch(21))).start()
    reads = live.session.stats["reads"]
    second = live.deadlines().wait(21, "daily", timeout=10)  # waits on the rolled-back record, not in a loop
    assert second.state == "late" and second.deliver and second.alert.generation == reopened[0].generation == 2
    assert live.session.stats["reads"] - reads < 150
    assert [e.event for e in live.history()].count("deadline_missed") == 2
    assert live.deadlines().alert(21, "daily", generation=1).delivered_at is not None


def late_epoch(ledger: EpochLedger, clock: Clock, epoch: int):
    """Open ``epoch``, let only ``fast`` vote, pass its deadline: the alert this watcher must deliver."""
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "daily", "fast", {})
    clock.now += 10
    verdict = ledger.deadlines().check(epoch, "daily")
    assert verdict.state == "late" and verdict.deliver
    return attempt, verdict.alert


@pytest.mark.parametrize("archived", [True, False])
def test_compaction_prunes_delivered_alerts_of_compacted_epochs_but_not_one_being_delivered(zk, tmp_path, archived):
    clock = Clock(time.time() - 86_400)
    ledger = EpochLedger(zk, "pruned", owner="watcher", clock=clock)
    location = str(tmp_path / "archive") if archived else None
    # without an archive at least the frontier epoch stays: a third sealed epoch lets 1 and 2 go
    ledger.create_pipeline(PipelineConfig({"daily": ("fast", "slow")}, archive=location,
                                          retain_epochs=0 if archived else 1))
    deadlines = ledger.deadlines()
    deadlines.declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=1.0))
    first, held = late_epoch(ledger, clock, 1)  # its callback is "running": the run node stays
    ledger.vote(first, "daily", "slow", {})
    second, done = late_epoch(ledger, clock, 2)
    deadlines.delivered(done)
    ledger.vote(second, "daily", "slow", {})
    assert deadlines.check(2, "daily").state == "sealed_late"  # records how late, on the alert
    clock.now += 100
    third = ledger.open_epoch(3)
    ledger.vote(third, "daily", "fast", {})
    ledger.vote(third, "daily", "slow", {})
    report = ledger.compact()
    assert {1, 2} <= set(report.compacted) and report.alerts_pruned == 1
    names = zk.get_children(ledger.paths.late_alerts)
    assert DeadlinePaths(ledger.paths).late_alert(1, 1, "daily").rsplit("/", 1)[1] in names  # being delivered: kept
    assert zk.exists(DeadlinePaths(ledger.paths).late_alert_delivery(1, 1, "daily")) is not None
    assert zk.exists(DeadlinePaths(ledger.paths).late_alert(2, 1, "daily")) is None
    answer = deadlines.alert(2, "daily")
    if archived:  # the archive still answers "was it late, by how much, waiting for whom"
        assert answer is not None and answer.late_by is not None and answer.late_by > 0
        assert [m.producer for m in answer.missing] == ["slow"] and answer.delivered_at is not None
    else:
        assert answer is None
    deadlines.delivered(held)
    assert ledger.compact().alerts_pruned == 1
    assert zk.get_children(ledger.paths.late_alerts) == []
    assert (deadlines.alert(1, "daily") is not None) is archived


def test_simultaneous_declares_never_exceed_the_cap(zk_factory, monkeypatch):
    from airflow_epochs.coordination.recipes.deadlines import deadlines as module

    # The cap is lowered so the race is at the cap after a few writes (1,024 real ones would only be slower).
    monkeypatch.setattr(module, "MAX_DECLARED", 3)
    zk = zk_factory()
    names = [f"c{i}" for i in range(12)]
    for round_ in range(3):  # a few races: one can pass by luck, three rarely do
        pipeline = f"capped{round_}"
        ledger = EpochLedger(zk, pipeline, owner="setup")
        ledger.create_pipeline(CONFIG)
        for name in names:
            ledger.consumer(name).register()
        ledger.deadlines().declare(DeadlineSpec("daily"))  # one in: two places left for twelve declarers
        mine = {name: EpochLedger(zk_factory(), pipeline, owner=name).deadlines() for name in names}
        barrier = threading.Barrier(len(names))
        outcomes: dict[str, str] = {}

        def declare(name: str, mine=mine, barrier=barrier, outcomes=outcomes) -> None:
            barrier.wait()
            try:
                mine[name].declare(DeadlineSpec("side", declarer=name, slack=5))
                outcomes[name] = "declared"
            except InvalidInput as refused:
                assert "at most 3" in str(refused)
                outcomes[name] = "refused"

        threads = [threading.Thread(target=declare, args=(name,)) for name in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        declared = sorted(n for n, o in outcomes.items() if o == "declared")
        assert sorted(zk.get_children(ledger.paths.deadlines)) == sorted(
            ["daily,pipeline"] + [f"side,{n}" for n in declared])
        assert sorted(outcomes.values()) == ["declared"] * 2 + ["refused"] * 10
    # replacing a declaration at the cap is not a new one: it is allowed
    again = EpochLedger(zk, "capped2", owner=declared[0]).deadlines()
    assert again.declare(DeadlineSpec("side", declarer=declared[0], slack=9)).slack == 9
    assert len(again.specs("side")) == 2


def test_compaction_without_an_archive_keeps_the_samples_of_epochs_never_folded(zk):
    clock = Clock(time.time() - 86_400)
    past = EpochLedger(zk, "unfolded", owner="history", clock=clock)
    past.create_pipeline(PipelineConfig({"daily": ("fast", "slow")}, retain_epochs=1))
    past.deadlines().declare(DeadlineSpec("daily", slack=10))
    assert past.deadlines().statistics("daily").through == 0  # nothing sealed yet: nothing folded
    for epoch in range(1, 8):
        opened = clock.now
        attempt = past.open_epoch(epoch)
        clock.now = opened + 3
        past.vote(attempt, "daily", "fast", {})
        clock.now = opened + 40 + epoch
        past.vote(attempt, "daily", "slow", {})
        clock.now = opened + 100
    folded = zk.exists(DeadlinePaths(past.paths).seal_stats("daily"))  # folded lazily: none of them yet
    assert folded is None or json.loads(zk.get(DeadlinePaths(past.paths).seal_stats("daily"))[0])["through"] == 0
    report = past.compact()
    assert set(report.compacted) == set(range(1, 7))
    assert zk.exists(past.paths.epoch(3)) is None  # without an archive nothing can read them again
    stats = past.deadlines().statistics("daily")
    assert stats.through == 7
    assert [s.since_open for s in stats.producers["slow"].samples] == pytest.approx([41, 42, 43, 44, 45, 46, 47])
