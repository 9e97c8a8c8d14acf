"""Epoch calendars: every data interval maps to exactly one epoch, consecutive intervals to consecutive
epochs. The cron calendar is checked against Airflow's own cron timetable (across a daylight-saving
change), not against a copy of its arithmetic."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
import pytest
from airflow.timetables.base import DataInterval, TimeRestriction
from airflow.timetables.interval import CronDataIntervalTimetable
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_epochs.coordination import CronEpochCalendar, EpochCalendar, InvalidEpoch, InvalidInput
from airflow_epochs.coordination.base import calendar as calendar_module

ORIGIN = datetime(2024, 1, 1, tzinfo=timezone.utc)


def airflow_intervals(cron: str, tz: str, start: datetime, count: int) -> list[DataInterval]:
    """The data intervals Airflow's scheduler gives a catch-up DAG with this cron schedule."""
    timetable = CronDataIntervalTimetable(cron, timezone=tz)
    restriction = TimeRestriction(earliest=pendulum.instance(start), latest=None, catchup=True)
    intervals: list[DataInterval] = []
    last = None
    for _ in range(count):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        assert info is not None and info.data_interval is not None
        intervals.append(info.data_interval)
        last = info.data_interval
    return intervals


@pytest.mark.parametrize(("cron", "tz", "start", "count"), [
    ("0 6 * * *", "Europe/Amsterdam", datetime(2024, 3, 25, tzinfo=timezone.utc), 12),  # spring forward
    ("0 6 * * *", "Europe/Amsterdam", datetime(2024, 10, 22, tzinfo=timezone.utc), 12),  # fall back
    ("30 */4 * * 1-5", "UTC", ORIGIN, 60),  # weekdays only: gaps over weekends
    ("@hourly", "America/New_York", datetime(2024, 3, 9, tzinfo=timezone.utc), 72),
    ("0 0 1 * *", "UTC", ORIGIN, 14),  # months of different lengths
])
def test_cron_calendar_matches_airflow_data_intervals(cron, tz, start, count):
    calendar = CronEpochCalendar(start, cron, tz)
    intervals = airflow_intervals(cron, tz, start, count)
    epochs = [calendar.epoch_for(interval.start) for interval in intervals]
    assert epochs == list(range(1, count + 1))
    for epoch, interval in zip(epochs, intervals, strict=True):
        begin, end = calendar.span(epoch)
        assert (begin, end) == (interval.start, interval.end), epoch
        # any moment inside the interval belongs to the same epoch; its end to the next
        assert calendar.epoch_for(interval.start + (interval.end - interval.start) / 2) == epoch
        assert calendar.epoch_for(interval.end) == epoch + 1


def test_cron_calendar_takes_pendulum_datetimes():
    # what a DAG file passes (pendulum origin) and what a task gets (pendulum data interval start)
    calendar = CronEpochCalendar(pendulum.datetime(2024, 1, 1, 6, tz="UTC"), "0 6 * * *")
    assert calendar.epoch_for(pendulum.datetime(2024, 1, 3, 6, tz="UTC")) == 3
    amsterdam = CronEpochCalendar(pendulum.datetime(2024, 3, 30, tz="Europe/Amsterdam"), "0 6 * * *",
                                  "Europe/Amsterdam")
    assert amsterdam.epoch_for(pendulum.datetime(2024, 3, 31, 6, tz="Europe/Amsterdam")) == 2
    assert amsterdam.span(2)[0].utcoffset() == timedelta(hours=2)


def test_cron_calendar_origin_on_a_fire_time_is_epoch_one():
    calendar = CronEpochCalendar(datetime(2024, 1, 1, 6, tzinfo=timezone.utc), "0 6 * * *")
    assert calendar.span(1)[0] == datetime(2024, 1, 1, 6, tzinfo=timezone.utc)
    assert calendar.epoch_for(datetime(2024, 1, 3, 5, 59, tzinfo=timezone.utc)) == 2
    with pytest.raises(InvalidEpoch, match="before the first epoch"):
        calendar.epoch_for(datetime(2024, 1, 1, 5, 59, tzinfo=timezone.utc))


def test_cron_calendar_answers_out_of_order_questions():
    # the cache of fire times grows on demand: asking a late epoch first must not change early answers
    later = CronEpochCalendar(ORIGIN, "0 0 * * *")
    assert later.span(400)[0] == ORIGIN + timedelta(days=399)
    assert later.epoch_for(ORIGIN + timedelta(days=3, hours=1)) == 4
    assert later.span(1) == (ORIGIN, ORIGIN + timedelta(days=1))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cron": "61 * * * *"}, "valid cron expression"),
    ({"cron": "@reboot"}, "valid cron expression"),
    ({"cron": 5}, "valid cron expression"),
    ({"timezone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
    ({"origin": datetime(2024, 1, 1)}, "timezone-aware"),
])
def test_cron_calendar_refuses_bad_arguments(kwargs, message):
    arguments = {"origin": ORIGIN, "cron": "@daily", "timezone": "UTC", **kwargs}
    with pytest.raises(InvalidInput, match=message):
        CronEpochCalendar(**arguments)


def test_cron_calendar_bounds_its_work(monkeypatch):
    monkeypatch.setattr(calendar_module, "MAX_CRON_EPOCHS", 5_000)
    assert CronEpochCalendar(ORIGIN, "* * * * *").epoch_for(ORIGIN + timedelta(minutes=4_999)) == 5_000
    minutely = CronEpochCalendar(ORIGIN, "* * * * *")
    with pytest.raises(InvalidEpoch, match="check the calendar's origin"):
        minutely.epoch_for(ORIGIN + timedelta(minutes=5_000))


@settings(max_examples=200, deadline=None)
@given(seconds=st.integers(min_value=0, max_value=10 * 365 * 86400),
       step=st.integers(min_value=1, max_value=40 * 86400))
def test_fixed_calendar_span_holds_the_moment(seconds, step):
    calendar = EpochCalendar(ORIGIN, timedelta(seconds=step))
    moment = ORIGIN + timedelta(seconds=seconds)
    epoch = calendar.epoch_for(moment)
    begin, end = calendar.span(epoch)
    assert begin <= moment < end
    assert calendar.span(epoch + 1)[0] == end


def test_fixed_calendar_takes_pendulum_datetimes_and_refuses_bad_ones():
    calendar = EpochCalendar(ORIGIN, timedelta(days=1))
    assert calendar.epoch_for(pendulum.datetime(2024, 1, 3, 12, tz="Europe/Amsterdam")) == 3
    with pytest.raises(InvalidEpoch, match="before the calendar's origin"):
        calendar.epoch_for(ORIGIN - timedelta(seconds=1))
    with pytest.raises(InvalidInput, match="positive timedelta"):
        EpochCalendar(ORIGIN, timedelta(0))
    with pytest.raises(InvalidInput, match="timezone-aware"):
        calendar.epoch_for(datetime(2024, 1, 2))
