"""Retries of coordination steps, for any caller (a task, a script, a Spark driver): which failures to
retry (:func:`disposition`), and a bounded, jittered exponential backoff (:func:`call_with_retries`).
How the provider's Airflow tasks apply them is in :mod:`airflow_epochs.retries`; this module imports
nothing from Airflow, so a Spark driver or the command line does not load it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
    SessionMovedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from airflow_epochs.coordination.base.errors import EpochsError, SessionLost

T = TypeVar("T")
Disposition = Literal["retry", "fail", "other"]

# kazoo raises these (outside our core, e.g. when a hook connects or a lock recipe retries) while
# the ensemble is unreachable or a session is being replaced; none of them means a definite answer.
TRANSIENT_KAZOO_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionLoss, ConnectionDropped, ConnectionClosedError, OperationTimeoutError, SessionExpiredError,
    SessionMovedError, KazooTimeoutError, RetryFailedError,
)


def disposition(exc: BaseException) -> Disposition:
    """``retry``, ``fail`` or ``other`` for ``exc`` (see the module docstring)."""
    if isinstance(exc, SessionLost):
        return "retry"  # a definite refusal of the old handle; a re-run of the step takes a new one
    if isinstance(exc, EpochsError):
        return "retry" if exc.retryable else "fail"
    if isinstance(exc, TRANSIENT_KAZOO_ERRORS):
        return "retry"
    return "other"


def describe(exc: BaseException) -> str:
    """``ClassName (kind): message`` for log lines."""
    kind = exc.kind if isinstance(exc, EpochsError) else "connection"
    return f"{type(exc).__name__} ({kind}): {exc}"


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter, bounded by one budget for the whole call.

    The n-th pause (from 0) is drawn uniformly from ``[d/2, d]`` where
    ``d = min(cap, first * factor**n)``: retries of many tasks hit by the same outage spread out
    instead of returning in lockstep. The budget counts from the first failure: once the next pause
    would end past it, the last error is raised.

    :param first: the first pause's upper bound, seconds.
    :param factor: growth of the bound per retry.
    :param cap: largest pause, seconds.
    :param budget: seconds from the first failure after which no further attempt is made.
    """

    first: float = 0.5
    factor: float = 2.0
    cap: float = 8.0
    budget: float = 60.0

    def __post_init__(self) -> None:
        for name in ("first", "factor", "cap", "budget"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Backoff {name} must be a non-negative number, not {value!r}")
        if self.factor < 1:
            raise ValueError(f"Backoff factor must be at least 1, not {self.factor!r}")

    def pause(self, retry: int, draw: Callable[[], float] = random.random) -> float:
        """The pause before retry number ``retry`` (0 for the first), jittered by ``draw()`` in [0, 1)."""
        bound = min(self.cap, self.first * self.factor ** min(retry, 64))
        return bound / 2 + bound / 2 * draw()


def call_with_retries(
    step: Callable[[], T],
    *,
    backoff: Backoff,
    on_retry: Callable[[BaseException, int, float, float], None] | None = None,
    retry_outcome_unknown: bool = True,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    draw: Callable[[], float] = random.random,
) -> T:
    """Run ``step``; while it fails with a ``retry`` error, pause (see :class:`Backoff`) and run it
    again, until the budget is spent; then (and for every other error) raise what it raised.

    ``step`` must be safe to repeat as a whole: it re-reads the state it acts on.

    :param on_retry: called as ``on_retry(exc, retry, pause, left)`` before each pause (for logging).
    :param retry_outcome_unknown: False for a step that is not idempotent (an :class:`OutcomeUnknown`
        is then raised at once, for a human or a request-id aware caller to resolve).
    """
    first_failure: float | None = None
    retry = 0
    while True:
        try:
            return step()
        except Exception as exc:
            if disposition(exc) != "retry":
                raise
            if not retry_outcome_unknown and isinstance(exc, EpochsError) and exc.kind == "outcome_unknown":
                raise
            now = clock()
            first_failure = now if first_failure is None else first_failure
            left = first_failure + backoff.budget - now
            pause = backoff.pause(retry, draw)
            if pause >= left:
                raise
            if on_retry is not None:
                on_retry(exc, retry, pause, left)
            sleep(pause)
            retry += 1


# -- the provider's tasks ---------------------------------------------------------------------
