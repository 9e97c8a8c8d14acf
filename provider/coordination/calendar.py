"""The epoch calendar: each data interval maps to exactly one epoch number.

Epoch 1 starts at ``origin``; epoch n covers ``[origin + (n-1)*interval, origin + n*interval)``. A
scheduled run, a catch-up run, a backfill and a manual run with a data interval all land on the epoch
whose span holds the interval's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from airflow_epochs.coordination.errors import InvalidEpoch, InvalidInput
from airflow_epochs.coordination.names import validate_epoch


@dataclass(frozen=True)
class EpochCalendar:
    """Fixed-length epochs from an origin.

    :param origin: start of epoch 1 (timezone-aware).
    :param interval: length of one epoch (e.g. one day).
    """

    origin: datetime
    interval: timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.origin, datetime) or self.origin.tzinfo is None:
            raise InvalidInput(f"origin must be a timezone-aware datetime, not {self.origin!r}")
        if not isinstance(self.interval, timedelta) or self.interval <= timedelta(0):
            raise InvalidInput(f"interval must be a positive timedelta, not {self.interval!r}")

    def epoch_for(self, moment: datetime) -> int:
        """The epoch whose span holds ``moment`` (e.g. a run's data interval start)."""
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise InvalidInput(f"expected a timezone-aware datetime, not {moment!r}")
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
