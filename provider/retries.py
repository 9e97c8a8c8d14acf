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

from collections.abc import Callable, MutableMapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy
from airflow.sdk.exceptions import AirflowFailException
from kazoo.exceptions import NoAuthError

from airflow_epochs.coordination import validate_epoch
from airflow_epochs.coordination.base.errors import AccessDenied, EpochsError
from airflow_epochs.coordination.base.retrying import (  # the Airflow-free half, re-exported for tasks
    TRANSIENT_KAZOO_ERRORS,
    Backoff,
    Disposition,
    call_with_retries,
    describe,
    disposition,
)

__all__ = ["TASK_RETRY_DEFAULTS", "TRANSIENT_KAZOO_ERRORS", "Backoff", "CoordinationRetries", "Disposition",
           "EpochsRetryPolicy", "call_with_retries", "describe", "disposition", "templated_epoch",
           "with_retry_defaults"]

if TYPE_CHECKING:
    from airflow.sdk import Context

T = TypeVar("T")

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
        except (NoAuthError, AccessDenied) as exc:  # definite: retrying with the same identity cannot help
            raise AirflowFailException(f"{what}: {refusal(getattr(self, 'zookeeper_conn_id', None))}") from exc
        except EpochsError as exc:
            if disposition(exc) == "fail" or (exc.kind == "outcome_unknown" and not self.retry_outcome_unknown):
                raise AirflowFailException(f"{what}: {describe(exc)}") from exc
            raise


def refusal(conn_id: str | None) -> str:
    """A NoAuth refusal in words: the connection and the identity the task connected as (kazoo's
    ``NoAuthError`` says nothing), and what to do about it."""
    from airflow.sdk import BaseHook

    from airflow_epochs.connection.embedded import with_embedded_credentials
    from airflow_epochs.connection.zookeeper import ZooKeeperSettings

    conn_id = conn_id or "zookeeper_default"
    try:
        conn = BaseHook.get_connection(conn_id)
        login = with_embedded_credentials(ZooKeeperSettings.from_fields(
            host=conn.host, port=conn.port, schema=conn.schema, login=conn.login, password=conn.password,
            extra=conn.extra_dejson)).login
    except Exception:  # noqa: BLE001 - the refusal is the news; an unreadable connection only loses the name
        return (f"ZooKeeper refused the request (NoAuth) to connection {conn_id!r}: the pipeline's ACL does not "
                "let its identity do this")
    if login:
        return (f"ZooKeeper refused digest user {login!r} of connection {conn_id!r} (NoAuth): the pipeline's ACL "
                "does not grant that identity this right (a wrong password counts as another identity)")
    return (f"ZooKeeper refused connection {conn_id!r} (NoAuth): it has no login, and the pipeline's ACL lets only "
            "its owner in; give the connection the owner's login and password")


def templated_epoch(value: Any) -> int:
    """An epoch task argument, which arrives templated (a string), as a validated integer; a bad one
    is a definite failure (:class:`AirflowFailException`): Airflow does not retry it."""
    try:
        return validate_epoch(int(str(value).strip()))
    except ValueError as exc:
        raise AirflowFailException(f"epoch must be a positive integer, got {value!r}: {exc}") from None
