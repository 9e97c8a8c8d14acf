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


def test_a_number_no_deadline_holds_is_refused_at_construction_and_at_decode():
    """1e300 s passes as a finite float, but every time computed from it overflows: it is refused in
    one line, whether given to ``DeadlineSpec`` or forged into a stored record or its calendar."""
    import datetime as dt

    from airflow_epochs.coordination import CorruptPayload, DeadlineSpec, EpochCalendar, InvalidInput
    from airflow_epochs.coordination.base.calendar import calendar_from_json
    from airflow_epochs.coordination.wire import payloads

    with pytest.raises(InvalidInput, match="at most"):
        DeadlineSpec("daily", mode="fixed", anchor="opened", delta=1e300)
    with pytest.raises(InvalidInput, match="at most"):
        DeadlineSpec("daily", mode="predicted", slack=1e300)
    forged = payloads.encode("deadline", {"partition": "daily", "mode": "fixed", "declarer": "pipeline",
                                          "anchor": "opened", "delta": 1e300})
    with pytest.raises(CorruptPayload, match="at most") as refused:
        DeadlineSpec.from_bytes(forged, path="/p/deadlines/daily,pipeline")
    assert "\n" not in str(refused.value)
    with pytest.raises(InvalidInput, match="cannot be read"):
        calendar_from_json({"origin": "2013-01-01T00:00:00+00:00", "interval_seconds": 1e300})
    with pytest.raises(InvalidInput, match="at most 3660 days"):
        EpochCalendar(dt.datetime(2013, 1, 1, tzinfo=dt.timezone.utc), dt.timedelta(days=4000))
    calendar = {"origin": "2013-01-01T00:00:00+00:00", "interval_seconds": 1e300}
    forged_calendar = payloads.encode("deadline", {"partition": "daily", "mode": "fixed", "declarer": "pipeline",
                                                   "anchor": "interval_end", "delta": 60, "calendar": calendar})
    with pytest.raises(CorruptPayload, match="cannot be read"):
        DeadlineSpec.from_bytes(forged_calendar, path="/p/deadlines/daily,pipeline")
