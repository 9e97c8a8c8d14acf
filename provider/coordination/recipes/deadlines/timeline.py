"""A partition's deadline as it moves with the votes.

A fixed deadline (``delta`` after the epoch's anchor) stands still. A predicted one is the latest
predicted vote of the producers still missing, plus ``slack``: each vote that lands removes a producer
from the missing set, so the deadline can only move earlier (the maximum over fewer producers). The
partition is late at the first moment ``t`` at which ``t`` has passed the deadline as it stands then;
since the deadline never moves later while time moves on, once late it stays late. So:

- unsealed, the partition is late now exactly when now has passed the deadline of the producers
  missing now (:func:`deadline_of`);
- sealed, it was late exactly when, before some vote, the deadline of the producers still missing
  then had passed (:func:`deadline_before_seal` walks the votes in the order they landed). This is how
  a seal is judged after the fact, whoever watched it (or nobody did).

Predictions for an epoch use only the samples of earlier epochs: once the epoch is sealed its own votes
are folded into the statistics, and they must not judge it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from airflow_epochs.coordination.recipes.deadlines.records import DeadlineSpec, ProducerStats, SealStats
from airflow_epochs.coordination.recipes.deadlines.stats import forecast_of


@dataclass(frozen=True)
class SealJudged:
    """How a sealed partition stood against its deadline: the deadline it was judged by, whether it
    passed before the last vote landed, and the producers missing then."""

    deadline_at: float | None
    late: bool
    missing: tuple[str, ...] = ()


def _before(stats: ProducerStats | None, epoch: int) -> ProducerStats | None:
    """A producer's statistics without the samples of ``epoch`` and later."""
    if stats is None:
        return None
    return replace(stats, samples=tuple(s for s in stats.samples if s.epoch < epoch))


def deadline_of(specs: Sequence[DeadlineSpec], stats: SealStats, epoch: int, opened_at: float | None,
                missing: Collection[str]) -> float | None:
    """The earliest of the declared deadlines of ``epoch`` while ``missing`` producers have not voted
    (None: none applies; a predicted deadline needs history of every missing producer)."""
    times: list[float] = []
    for spec in specs:
        if spec.mode == "fixed":
            anchor = spec.interval_end(epoch) if spec.anchor == "interval_end" else opened_at
            if anchor is not None:
                times.append(anchor + spec.delta)
        elif opened_at is not None and missing:
            end = spec.interval_end(epoch)
            lates = [forecast_of(name, _before(stats.producers.get(name), epoch), opened_at, end,
                                 spec.quantile).late_at for name in missing]
            if all(late is not None for late in lates):
                times.append(max(late for late in lates if late is not None) + spec.slack)
    return min(times, default=None)


def deadline_before_seal(specs: Sequence[DeadlineSpec], stats: SealStats, epoch: int, opened_at: float | None,
                         votes: Mapping[str, float]) -> SealJudged:
    """Judge a sealed partition by its votes (``producer -> when it voted``): late if, before some vote
    landed, the deadline of the producers still missing then had passed."""
    deadline: float | None = None
    for landed in sorted(set(votes.values())):
        missing = tuple(sorted(name for name, at in votes.items() if at >= landed))
        deadline = deadline_of(specs, stats, epoch, opened_at, missing)
        if deadline is not None and deadline < landed:
            return SealJudged(deadline, True, missing)
    return SealJudged(deadline, False)
