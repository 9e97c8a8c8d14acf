"""Epoch calendars: each data interval maps to exactly one epoch number.

Two shapes, one contract (:class:`Calendar`):

- :class:`EpochCalendar`: fixed-length epochs. Epoch 1 starts at ``origin``; epoch n covers
  ``[origin + (n-1)*interval, origin + n*interval)``.
- :class:`CronEpochCalendar`: epochs between consecutive fire times of a cron expression (what an
  Airflow cron schedule's data intervals are). Epoch 1 starts at the first fire time at or after
  ``origin``.

A scheduled run, a catch-up run, a backfill and a manual run with a data interval all land on the
epoch whose span holds the interval's start.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from airflow_epochs.coordination.base.errors import InvalidEpoch, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch

# A cron calendar counts fire times one by one (croniter: ~80 us each here); this bounds the work to
# a few seconds (an hourly schedule reaches it after 11 years) so a wrong origin fails fast.
MAX_CRON_EPOCHS = 100_000

# The longest epoch a calendar may have (ten years): a longer one is a forged or mistyped record, whose
# spans would overflow the dates computed from them.
MAX_INTERVAL = timedelta(days=3660)


class Calendar(Protocol):
    """What an epoch calendar offers the operators."""

    def epoch_for(self, moment: datetime) -> int: ...

    def span(self, epoch: int) -> tuple[datetime, datetime]: ...

    def to_json(self) -> dict[str, str | float]: ...


def _aware(moment: object, what: str) -> datetime:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidInput(f"{what} must be a timezone-aware datetime, not {moment!r}")
    return moment


@dataclass(frozen=True)
class EpochCalendar:
    """Fixed-length epochs from an origin.

    :param origin: start of epoch 1 (timezone-aware).
    :param interval: length of one epoch (e.g. one day).
    """

    origin: datetime
    interval: timedelta

    def __post_init__(self) -> None:
        _aware(self.origin, "origin")
        if not isinstance(self.interval, timedelta) or self.interval <= timedelta(0) or self.interval > MAX_INTERVAL:
            raise InvalidInput(f"interval must be a positive timedelta of at most {MAX_INTERVAL.days} days, not "
                               f"{self.interval!r}")

    def epoch_for(self, moment: datetime) -> int:
        """The epoch whose span holds ``moment`` (e.g. a run's data interval start)."""
        _aware(moment, "moment")
        if moment < self.origin:
            raise InvalidEpoch(f"{moment.isoformat()} is before the calendar's origin {self.origin.isoformat()}")
        # Through integer microseconds: datetime subclasses (pendulum) do not divide by a timedelta.
        elapsed = round((moment.timestamp() - self.origin.timestamp()) * 1_000_000)
        step = round(self.interval.total_seconds() * 1_000_000)
        return validate_epoch(elapsed // step + 1)

    def span(self, epoch: int) -> tuple[datetime, datetime]:
        """Start (inclusive) and end (exclusive) of ``epoch``."""
        validate_epoch(epoch)
        start = self.origin + (epoch - 1) * self.interval
        return start, start + self.interval

    def to_json(self) -> dict[str, str | float]:
        return {"origin": self.origin.isoformat(), "interval_seconds": self.interval.total_seconds()}


@dataclass(frozen=True)
class CronEpochCalendar:
    """Epochs between consecutive fire times of a cron expression.

    Epoch n spans from the n-th fire time at or after ``origin`` to the next one. Give the DAG's own
    cron expression and timezone, so that each data interval of the DAG is exactly one epoch.

    :param origin: no epoch starts before this moment (timezone-aware).
    :param cron: a cron expression (5 fields, 6 with seconds, or an alias such as ``@daily``).
    :param timezone: IANA zone the cron expression is read in (daylight-saving aware).
    """

    origin: datetime
    cron: str
    timezone: str = "UTC"
    # fire times found so far, in order; grown on demand
    _ticks: list[datetime] = field(default_factory=list, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _aware(self.origin, "origin")
        if not isinstance(self.cron, str) or not croniter.is_valid(self.cron):
            raise InvalidInput(f"cron must be a valid cron expression, not {self.cron!r}")
        if not isinstance(self.timezone, str):
            raise InvalidInput(f"timezone must be an IANA zone name, not {self.timezone!r}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(f"unknown timezone {self.timezone!r}") from None

    def _first(self) -> datetime:
        # croniter's next fire time is strictly after its start: start one microsecond earlier so a
        # fire time equal to the origin counts as epoch 1.
        # Through a plain datetime: croniter loses the zone of a pendulum DateTime (Airflow's type).
        start = datetime.fromtimestamp(self.origin.timestamp(), ZoneInfo(self.timezone)) - timedelta(microseconds=1)
        tick: datetime = croniter(self.cron, start).get_next(datetime)
        return tick

    def _grow(self, until_count: int | None = None, past: datetime | None = None) -> None:
        """Find fire times until there are ``until_count`` of them or one is after ``past``."""
        with self._lock:
            if not self._ticks:
                self._ticks.append(self._first())
            if (until_count is None or len(self._ticks) >= until_count) and \
                    (past is None or self._ticks[-1] > past):
                return
            itr = croniter(self.cron, self._ticks[-1])
            while (until_count is not None and len(self._ticks) < until_count) or \
                    (past is not None and self._ticks[-1] <= past):
                if len(self._ticks) > MAX_CRON_EPOCHS:
                    raise InvalidEpoch(f"more than {MAX_CRON_EPOCHS} epochs of {self.cron!r} since "
                                       f"{self.origin.isoformat()}: check the calendar's origin")
                self._ticks.append(itr.get_next(datetime))

    def epoch_for(self, moment: datetime) -> int:
        """The epoch whose span holds ``moment`` (e.g. a run's data interval start)."""
        _aware(moment, "moment")
        self._grow(past=moment)
        count = bisect.bisect_right(self._ticks, moment)
        if count == 0:
            raise InvalidEpoch(f"{moment.isoformat()} is before the first epoch of {self.cron!r}, which starts "
                               f"{self._ticks[0].isoformat()}")
        return validate_epoch(count)

    def span(self, epoch: int) -> tuple[datetime, datetime]:
        """Start (inclusive) and end (exclusive) of ``epoch``."""
        validate_epoch(epoch)
        self._grow(until_count=epoch + 1)
        return self._ticks[epoch - 1], self._ticks[epoch]

    def to_json(self) -> dict[str, str | float]:
        return {"origin": self.origin.isoformat(), "cron": self.cron, "timezone": self.timezone}


def calendar_from_json(data: Mapping[str, Any]) -> EpochCalendar | CronEpochCalendar:
    """A calendar rebuilt from its ``to_json()``; :class:`InvalidInput` naming it when it cannot be (a
    forged interval of 1e300 s included: it is refused, not overflowed)."""
    try:
        origin = datetime.fromisoformat(str(data["origin"]))
        if "cron" in data:
            return CronEpochCalendar(origin, str(data["cron"]), str(data.get("timezone", "UTC")))
        return EpochCalendar(origin, timedelta(seconds=float(data["interval_seconds"])))
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"calendar {dict(data)!r:.200} cannot be read: {exc}") from None
