"""The records of partition deadlines: recent seal times per producer, a declared deadline, a
prediction and the one alert of a late (epoch, partition).

:class:`SealStats` is what a prediction reads instead of the history: per producer of one
partition, how long after its epoch opened (and after its data interval ended, when a calendar is
known) it voted, in the last ``window`` sealed epochs. It is one znode of bounded size
(``window`` x producers samples).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from airflow_epochs.coordination.base.calendar import CronEpochCalendar, EpochCalendar, calendar_from_json
from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.wire import payloads

# Sealed epochs a partition's statistics keep per producer, by default and at most.
DEFAULT_WINDOW = 32
MAX_WINDOW = 256
# Fewer samples than this for a missing producer: the prediction says "too little history".
MIN_SAMPLES = 5
DEFAULT_QUANTILE = 0.9
MODES = ("fixed", "predicted")
ANCHORS = ("interval_end", "opened")

Calendar = EpochCalendar | CronEpochCalendar


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between order statistics); ``values`` not empty."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _generation(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptPayload(f"{where}: generation {value!r} is not a positive integer")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CorruptPayload(f"{where}: {value!r} is not a number")
    return float(value)


@dataclass(frozen=True)
class Sample:
    """One producer's vote in one sealed epoch: seconds after the epoch opened, and after its data
    interval ended (None: no calendar known)."""

    epoch: int
    since_open: float
    since_end: float | None = None


@dataclass(frozen=True)
class ProducerStats:
    """A producer's recent samples (oldest first) and when it last voted."""

    samples: tuple[Sample, ...] = ()
    last_voted_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"samples": [[s.epoch, s.since_open, s.since_end] for s in self.samples],
                "last_voted_at": self.last_voted_at}

    @classmethod
    def from_json(cls, value: Any, where: str) -> ProducerStats:
        if not isinstance(value, Mapping) or not isinstance(value.get("samples"), list):
            raise CorruptPayload(f"{where}: not producer statistics: {value!r}")
        samples = []
        for row in value["samples"]:
            if not isinstance(row, list) or len(row) != 3 or isinstance(row[0], bool) or not isinstance(row[0], int):
                raise CorruptPayload(f"{where}: not a sample: {row!r}")
            samples.append(Sample(row[0], _number(row[1], where),
                                  None if row[2] is None else _number(row[2], where)))
        last = value.get("last_voted_at")
        return cls(tuple(samples), None if last is None else _number(last, where))


@dataclass(frozen=True)
class SealStats:
    """The seal-time statistics of one partition: ``through`` is the newest epoch folded in."""

    partition: str
    through: int = 0
    window: int = DEFAULT_WINDOW
    producers: Mapping[str, ProducerStats] = field(default_factory=dict)

    def folded(self, epoch: int, opened_at: float, interval_end: float | None,
               votes: Mapping[str, float]) -> SealStats:
        """These statistics with the votes (producer -> voted_at) of sealed ``epoch`` added, each
        producer keeping its newest ``window`` samples."""
        producers = dict(self.producers)
        for name, voted_at in votes.items():
            old = producers.get(name, ProducerStats())
            sample = Sample(epoch, max(0.0, voted_at - opened_at),
                            None if interval_end is None else voted_at - interval_end)
            samples = (*(s for s in old.samples if s.epoch != epoch), sample)
            last = voted_at if old.last_voted_at is None else max(old.last_voted_at, voted_at)
            producers[name] = ProducerStats(samples[-self.window:], last)
        return replace(self, through=max(self.through, epoch), producers=producers)

    def to_bytes(self) -> bytes:
        return payloads.encode("seal_stats", {
            "partition": self.partition, "through": self.through, "window": self.window,
            "producers": {name: stats.to_json() for name, stats in sorted(self.producers.items())}})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> SealStats:
        doc = payloads.decode("seal_stats", raw, path=path)
        producers = {str(name): ProducerStats.from_json(value, f"{path} producer {name!r}")
                     for name, value in doc["producers"].items()}
        return cls(str(doc["partition"]), int(doc["through"]), int(doc["window"]), producers)


# The longest span a deadline or its slack may name: a year (a deadline further out is no deadline; a
# number no record holds, 1e300 say, would overflow every time computed from it).
MAX_DEADLINE_SECONDS = 366 * 24 * 3600.0


def _seconds(value: object, what: str, *, positive: bool = False) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0) or value > MAX_DEADLINE_SECONDS:
        raise InvalidInput(f"{what} must be a {'positive' if positive else 'non-negative'} number of seconds or a "
                           f"timedelta of at most {MAX_DEADLINE_SECONDS:.0f} s (a year), not {value!r}")
    return float(value)


@dataclass(frozen=True)
class DeadlineSpec:
    """A partition's deadline, declared by the pipeline (``declarer`` ``pipeline``) or a consumer.

    :param partition: the partition it is about.
    :param mode: ``fixed``: ``delta`` seconds after the epoch's ``anchor`` (its data interval's end,
        from ``calendar``, or when it opened); ``predicted``: the ``quantile`` of the predicted seal
        time plus ``slack`` seconds.
    :param delta: for ``fixed``, seconds (or a timedelta) after the anchor; not negative.
    :param anchor: ``interval_end`` (needs ``calendar``) or ``opened``.
    :param quantile: for ``predicted``, strictly between 0 and 1 (default 0.9).
    :param slack: for ``predicted``, seconds (or a timedelta) added to the prediction; not negative.
    :param calendar: the epoch calendar (an ``EpochCalendar``, a ``CronEpochCalendar`` or its JSON).
    :param declarer: ``pipeline``, or the consumer that declares it.
    """

    partition: str
    mode: str = "predicted"
    delta: float = 0.0
    anchor: str = "interval_end"
    quantile: float = DEFAULT_QUANTILE
    slack: float = 0.0
    calendar: Any = None
    declarer: str = "pipeline"

    def __post_init__(self) -> None:
        validate_name("partition", self.partition)
        validate_name("owner", self.declarer)
        if self.mode not in MODES:
            raise InvalidInput(f"deadline mode must be one of {MODES}, not {self.mode!r}")
        if self.anchor not in ANCHORS:
            raise InvalidInput(f"deadline anchor must be one of {ANCHORS}, not {self.anchor!r}")
        object.__setattr__(self, "delta", _seconds(self.delta, "deadline delta"))
        object.__setattr__(self, "slack", _seconds(self.slack, "deadline slack"))
        q = self.quantile
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            raise InvalidInput(f"deadline quantile must be strictly between 0 and 1, not {q!r}")
        calendar = self.calendar
        if isinstance(calendar, Mapping):
            calendar = calendar_from_json(calendar)
        if calendar is not None and not isinstance(calendar, (EpochCalendar, CronEpochCalendar)):
            raise InvalidInput(f"deadline calendar must be an EpochCalendar or CronEpochCalendar, not {calendar!r}")
        object.__setattr__(self, "calendar", calendar)
        if self.mode == "fixed" and self.anchor == "interval_end" and calendar is None:
            raise InvalidInput(f"a fixed deadline of partition {self.partition!r} after the data interval's end "
                               "needs the pipeline's calendar (calendar=...), or anchor='opened'")

    def interval_end(self, epoch: int) -> float | None:
        """When ``epoch``'s data interval ends (epoch seconds), or None without a calendar."""
        return None if self.calendar is None else self.calendar.span(epoch)[1].timestamp()

    def to_bytes(self) -> bytes:
        return payloads.encode("deadline", {
            "partition": self.partition, "mode": self.mode, "delta": self.delta, "anchor": self.anchor,
            "quantile": self.quantile, "slack": self.slack, "declarer": self.declarer,
            "calendar": None if self.calendar is None else self.calendar.to_json()})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> DeadlineSpec:
        doc = payloads.decode("deadline", raw, path=path)
        try:
            return cls(str(doc["partition"]), str(doc["mode"]), doc.get("delta", 0.0), str(doc.get("anchor")),
                       doc.get("quantile", DEFAULT_QUANTILE), doc.get("slack", 0.0), doc.get("calendar"),
                       str(doc["declarer"]))
        except InvalidInput as exc:
            raise CorruptPayload(f"{path}: {exc}") from None


@dataclass(frozen=True)
class ProducerForecast:
    """When a missing producer is expected to vote: typically (median) and late (the quantile);
    None for both when it has too little history. ``last_voted_at``: its newest vote in any epoch."""

    producer: str
    typical_at: float | None
    late_at: float | None
    last_voted_at: float | None
    samples: int

    def to_json(self) -> dict[str, Any]:
        return {"producer": self.producer, "typical_at": self.typical_at, "late_at": self.late_at,
                "last_voted_at": self.last_voted_at, "samples": self.samples}

    @classmethod
    def from_json(cls, value: Any, where: str) -> ProducerForecast:
        if not isinstance(value, Mapping) or not isinstance(value.get("producer"), str):
            raise CorruptPayload(f"{where}: not a producer forecast: {value!r}")

        def opt(key: str) -> float | None:
            return None if value.get(key) is None else _number(value[key], where)

        return cls(value["producer"], opt("typical_at"), opt("late_at"), opt("last_voted_at"),
                   int(value.get("samples", 0)))


@dataclass(frozen=True)
class SealForecast:
    """The predicted seal of one (epoch, partition).

    ``status``: ``sealed`` (``sealed_at`` says when), ``sealing`` (every vote is in), ``predicted``
    (``typical_at`` and ``late_at`` are the latest predicted votes of the ``missing`` producers),
    ``too_little_history`` (some missing producer has fewer than ``MIN_SAMPLES`` (5) samples: no
    guess), or ``not_open``.
    """

    epoch: int
    partition: str
    status: str
    typical_at: float | None = None
    late_at: float | None = None
    quantile: float = DEFAULT_QUANTILE
    missing: tuple[ProducerForecast, ...] = ()
    opened_at: float | None = None
    sealed_at: float | None = None
    # the epoch's opening it is about (after a rollback: the reopening to come; 0: no record of the epoch)
    generation: int = 1


@dataclass(frozen=True)
class LateAlert:
    """The one alert of a late (epoch, partition): when its deadline was, when and by whom it was
    raised, the producers it still waited for; ``sealed_at`` and ``late_by`` once it sealed after all."""

    epoch: int
    partition: str
    deadline_at: float
    raised_at: float
    raised_by: str
    missing: tuple[ProducerForecast, ...]
    delivered_at: float | None = None
    sealed_at: float | None = None
    late_by: float | None = None
    request: str = ""
    generation: int = 1

    def to_bytes(self) -> bytes:
        return payloads.encode("late_alert", {
            "epoch": self.epoch, "partition": self.partition, "deadline_at": self.deadline_at,
            "raised_at": self.raised_at, "raised_by": self.raised_by,
            "missing": [m.to_json() for m in self.missing], "delivered_at": self.delivered_at,
            "sealed_at": self.sealed_at, "late_by": self.late_by, "request": self.request,
            "generation": self.generation})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> LateAlert:
        doc = payloads.decode("late_alert", raw, path=path)

        def opt(key: str) -> float | None:
            return None if doc.get(key) is None else _number(doc[key], path)

        return cls(int(doc["epoch"]), str(doc["partition"]), float(doc["deadline_at"]), float(doc["raised_at"]),
                   str(doc["raised_by"]), tuple(ProducerForecast.from_json(m, path) for m in doc["missing"]),
                   opt("delivered_at"), opt("sealed_at"), opt("late_by"), str(doc.get("request", "")),
                   _generation(doc.get("generation", 1), path))

    def to_json(self) -> dict[str, Any]:
        """The alert as the callback receives it (JSON: it crosses the triggerer's serialisation)."""
        return {"epoch": self.epoch, "generation": self.generation, "partition": self.partition,
                "deadline_at": self.deadline_at,
                "raised_at": self.raised_at, "raised_by": self.raised_by,
                "missing": [m.to_json() for m in self.missing],
                # set when the partition sealed before the alert was raised (judged after the seal)
                "sealed_at": self.sealed_at, "late_by": self.late_by}
