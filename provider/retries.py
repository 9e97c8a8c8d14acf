"""Retries of coordination steps: which failures to retry, how, and how the provider's tasks apply it.

A failure is one of three things for a caller (:func:`disposition`):

- ``retry``: nothing was written, or the step is idempotent and may simply be run again (a
  :class:`RetryableError`, an :class:`OutcomeUnknown`, kazoo's own connection errors, and
  :class:`SessionLost`, whose handle a re-run of the whole step obtains again under a new session);
- ``fail``: a definite answer (bad input, a refusal, a corrupt znode): repeating it cannot help;
- ``other``: not a coordination error at all (a Spark job's failure, a bug): the caller's usual policy.

:func:`call_with_retries` retries a step with a bounded, jittered exponential backoff (:class:`Backoff`),
from a task, a script or a Spark driver. The provider's tasks use it in two layers, one per kind of fault:

1. **Inside a try** (:class:`CoordinationRetries.coordinated`): a step that meets a retryable or
   outcome-unknown coordination error (ZooKeeper unreachable, a lost answer, a lost session) is run
   again with jittered exponential backoff, within one budget (60 s by default) counted from the
   first failure. A ZooKeeper restart or a leader election then costs seconds and no scheduler round
   trip, and it works the same under ``dag.test()``. A definite answer (bad input, a refusal, a
   corrupt znode) becomes :class:`AirflowFailException`: Airflow does not retry it.
2. **Between tries** (:data:`TASK_RETRY_DEFAULTS`, :class:`EpochsRetryPolicy`): Airflow's own
   retries, with exponential backoff, for what no code inside a try can handle: the worker killed,
   an outage longer than the budget, a trigger that failed, and Airflow's defer race (a deferred
   task marked failed by the stale "success" of its own defer exit, apache/airflow#66374, #67287,
   #71580, #72716). Every step of the provider is idempotent (opening resumes the owner's attempt,
   a repeated vote is a no-op, a Spark job's run directory is fresh and invisible until sealed), so a
   retry is always safe, and it resumes from the last sealed snapshot.

Both apply to the provider's operators and sensors by default; a value given on the task or in the
DAG's ``default_args`` wins. Tasks of your own that call :mod:`airflow_epochs.coordination` get the
same decisions with ``retry_policy=EpochsRetryPolicy()`` and ``**TASK_RETRY_DEFAULTS``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy
from airflow.sdk.exceptions import AirflowFailException
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

from airflow_epochs.coordination import validate_epoch
from airflow_epochs.coordination.errors import EpochsError, SessionLost

if TYPE_CHECKING:
    from airflow.sdk import Context

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

#: Airflow retries of every operator and sensor of the provider (unless given on the task or in
#: ``default_args``): pauses of about 5-10, 10-20, 20-40 and 40-60 s (Airflow adds its own jitter).
TASK_RETRY_DEFAULTS: dict[str, Any] = {
    "retries": 4,
    "retry_delay": timedelta(seconds=5),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(seconds=60),
}

#: The in-try budget: pauses of 0.25-0.5 s doubling up to 4-8 s, for at most 60 s from the first failure.
COORDINATION_BACKOFF = Backoff(first=0.5, factor=2.0, cap=8.0, budget=60.0)


class EpochsRetryPolicy(RetryPolicy):
    """Airflow's retry decision by error kind: a definite coordination answer fails the task at once,
    a retryable or outcome-unknown one is retried (within the task's ``retries``), anything else
    follows the task's usual retries."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Context | None = None) -> RetryDecision:
        verdict = disposition(exception)
        if verdict == "fail":
            return RetryDecision.fail(reason=f"a definite answer, not retried: {describe(exception)}")
        if verdict == "retry":
            return RetryDecision.retry(reason=f"coordination may succeed later: {describe(exception)}")
        return RetryDecision.default()

    def serialize(self) -> dict[str, Any]:
        return {"__type": "EpochsRetryPolicy"}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> EpochsRetryPolicy:
        return cls()


def with_retry_defaults(kwargs: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Fill :data:`TASK_RETRY_DEFAULTS` and :class:`EpochsRetryPolicy` into an operator's keyword
    arguments where neither the task nor its DAG's ``default_args`` (which Airflow passes along as
    ``default_args``) gives a value."""
    given = kwargs.get("default_args") or {}
    for key, value in (*TASK_RETRY_DEFAULTS.items(), ("retry_policy", None)):
        if key not in kwargs and key not in given:
            kwargs[key] = EpochsRetryPolicy() if key == "retry_policy" else value
    return kwargs


class CoordinationRetries:
    """Mixin of the provider's operators and sensors: :meth:`coordinated` runs one idempotent step
    against ZooKeeper with the in-try retries and the error mapping described in the module.

    :attr:`coordination_backoff` sets the in-try budget; :attr:`retry_outcome_unknown` is False on
    operators whose step is not idempotent (a lost answer then fails the try for a human to check).
    """

    coordination_backoff: Backoff = COORDINATION_BACKOFF
    retry_outcome_unknown: bool = True
    log: Any

    def coordinated(self, step: Callable[[], T], *, what: str) -> T:
        """Run ``step`` (which opens its own ZooKeeper connection and re-reads what it acts on)."""

        def on_retry(exc: BaseException, retry: int, pause: float, left: float) -> None:
            self.log.warning("%s: %s; trying again in %.1f s (retry %d, %.0f s of this try's budget left)",
                             what, describe(exc), pause, retry + 1, left)

        try:
            return call_with_retries(step, backoff=self.coordination_backoff, on_retry=on_retry,
                                     retry_outcome_unknown=self.retry_outcome_unknown)
        except EpochsError as exc:
            if disposition(exc) == "fail" or (exc.kind == "outcome_unknown" and not self.retry_outcome_unknown):
                raise AirflowFailException(f"{what}: {describe(exc)}") from exc
            raise


def templated_epoch(value: Any) -> int:
    """An epoch task argument, which arrives templated (a string), as a validated integer; a bad one
    is a definite failure (:class:`AirflowFailException`): Airflow does not retry it."""
    try:
        return validate_epoch(int(str(value).strip()))
    except ValueError as exc:
        raise AirflowFailException(f"epoch must be a positive integer, got {value!r}: {exc}") from None
