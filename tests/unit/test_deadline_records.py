"""The deadline records as pure values: quantiles, the bounded statistics window, and the bytes of
a declared deadline, statistics and an alert read back as written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_epochs.coordination import CorruptPayload, EpochCalendar, InvalidInput
from airflow_epochs.coordination.recipes.deadlines.records import (
    DeadlineSpec,
    LateAlert,
    ProducerForecast,
    SealStats,
    quantile,
)


def test_quantile_interpolates_between_order_statistics():
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([10.0], 0.9) == 10.0
    assert quantile(list(map(float, range(11))), 0.9) == pytest.approx(9.0)


def test_statistics_keep_only_the_window_and_the_newest_vote():
    stats = SealStats("p", window=3)
    for epoch in range(1, 6):
        stats = stats.folded(epoch, 100.0 * epoch, None, {"a": 100.0 * epoch + epoch})
    kept = stats.producers["a"]
    assert [s.epoch for s in kept.samples] == [3, 4, 5] and [s.since_open for s in kept.samples] == [3, 4, 5]
    assert kept.last_voted_at == 505.0 and stats.through == 5
    assert SealStats.from_bytes(stats.to_bytes(), path="/s") == stats
    again = stats.folded(5, 500.0, 490.0, {"a": 505.0})  # folding an epoch twice keeps one sample of it
    assert [s.epoch for s in again.producers["a"].samples] == [3, 4, 5]
    assert again.producers["a"].samples[-1].since_end == 15.0


def test_a_declared_deadline_reads_back_with_its_calendar():
    calendar = EpochCalendar(datetime(2026, 1, 1, tzinfo=UTC), timedelta(hours=1))
    spec = DeadlineSpec("daily", mode="fixed", delta=timedelta(minutes=5), calendar=calendar)
    assert spec.delta == 300.0 and spec.interval_end(2) == datetime(2026, 1, 1, 2, tzinfo=UTC).timestamp()
    assert DeadlineSpec.from_bytes(spec.to_bytes(), path="/d") == spec
    with pytest.raises(InvalidInput, match="calendar"):
        DeadlineSpec("daily", calendar={"origin": "not a date", "interval_seconds": 3})


def test_an_alert_reads_back_and_a_forged_one_is_refused():
    alert = LateAlert(4, "daily", 10.0, 11.0, "w", (ProducerForecast("slow", 12.0, 13.0, 5.0, 20),), request="r")
    assert LateAlert.from_bytes(alert.to_bytes(), path="/a") == alert
    assert alert.to_json()["missing"][0]["producer"] == "slow"
    forged = alert.to_bytes().replace(b'"producer":"slow"', b'"producer":7')
    with pytest.raises(CorruptPayload):
        LateAlert.from_bytes(forged, path="/a")
