"""Retries by error kind: the pure decision and backoff (a fake clock), the defaults and the retry
policy the provider's tasks carry, and the mapping of definite answers to AirflowFailException."""

from __future__ import annotations

from datetime import timedelta

import pendulum
import pytest
from kazoo.exceptions import ConnectionLoss, NoAuthError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from airflow_epochs.coordination import (
    AttemptSuperseded,
    CoordinationUnavailable,
    CorruptPayload,
    EpochOutOfOrder,
    InvalidEpoch,
    OutcomeUnknown,
    SessionLost,
)
from airflow_epochs.retries import Backoff, call_with_retries, disposition


@pytest.mark.parametrize(("exc", "verdict"), [
    (CoordinationUnavailable("down"), "retry"),
    (OutcomeUnknown("lost", request_id="r1"), "retry"),
    (SessionLost("expired"), "retry"),
    (ConnectionLoss(), "retry"),
    (SessionExpiredError(), "retry"),
    (KazooTimeoutError("Connection time-out"), "retry"),
    (InvalidEpoch("epoch 0"), "fail"),
    (EpochOutOfOrder("epoch 3 before 2"), "fail"),
    (AttemptSuperseded("zombie", attempt=1, current=2), "fail"),
    (CorruptPayload("bad json"), "fail"),
    (NoAuthError(), "other"),
    (RuntimeError("a Spark job failed"), "other"),
])
def test_every_error_kind_has_one_disposition(exc, verdict):
    assert disposition(exc) == verdict


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def test_backoff_grows_with_jitter_within_its_bounds_and_cap():
    backoff = Backoff(first=1.0, factor=2.0, cap=8.0, budget=100.0)
    for retry, bound in enumerate([1, 2, 4, 8, 8, 8]):
        assert backoff.pause(retry, lambda: 0.0) == bound / 2
        assert backoff.pause(retry, lambda: 0.999999) == pytest.approx(bound, rel=1e-5)
    with pytest.raises(ValueError, match=r"factor must be at least 1, not 0\.5"):
        Backoff(factor=0.5)
    with pytest.raises(ValueError, match="budget must be a non-negative number, not -1"):
        Backoff(budget=-1)


def test_transient_errors_are_retried_until_the_step_succeeds():
    time = FakeTime()
    failures = [ConnectionLoss(), CoordinationUnavailable("down"), OutcomeUnknown("lost", request_id="r")]
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "done"

    seen: list[tuple[str, int]] = []

    def on_retry(exc: BaseException, n: int, pause: float, left: float) -> None:
        seen.append((type(exc).__name__, n))

    result = call_with_retries(step, backoff=Backoff(first=1, budget=60), clock=time.clock, sleep=time.sleep,
                               draw=lambda: 0.5, on_retry=on_retry)
    assert result == "done" and len(calls) == 4
    assert time.pauses == [0.75, 1.5, 3.0]
    assert seen == [("ConnectionLoss", 0), ("CoordinationUnavailable", 1), ("OutcomeUnknown", 2)]


def test_one_budget_for_the_whole_call_then_the_last_error():
    time = FakeTime()

    def step() -> None:
        time.now += 2.0  # each attempt itself takes time: it counts against the same budget
        raise CoordinationUnavailable("still down")

    with pytest.raises(CoordinationUnavailable, match="still down"):
        call_with_retries(step, backoff=Backoff(first=1, factor=2, cap=4, budget=20), clock=time.clock,
                          sleep=time.sleep, draw=lambda: 1.0)
    assert time.now <= 2.0 + 20.0 + 2.0
    assert sum(time.pauses) + 2.0 * (len(time.pauses) + 1) == time.now


def test_definite_answers_and_foreign_errors_are_never_retried():
    for exc in (EpochOutOfOrder("no"), RuntimeError("job failed")):
        calls: list[int] = []

        def step(exc: Exception = exc, calls: list[int] = calls) -> None:
            calls.append(1)
            raise exc

        with pytest.raises(type(exc)):
            call_with_retries(step, backoff=Backoff(), sleep=lambda s: pytest.fail("slept"))
        assert calls == [1]


def test_outcome_unknown_is_raised_at_once_for_a_step_that_is_not_idempotent():
    with pytest.raises(OutcomeUnknown):
        call_with_retries(lambda: (_ for _ in ()).throw(OutcomeUnknown("lost", request_id="r")),
                          backoff=Backoff(), retry_outcome_unknown=False, sleep=lambda s: pytest.fail("slept"))


# -- the Airflow side ------------------------------------------------------------------------------

def test_operators_and_sensors_carry_retry_defaults_that_task_and_dag_settings_override():
    from airflow.sdk import DAG

    from airflow_epochs.operators import OpenEpochOperator, SparkEpochOperator, VotePartitionOperator
    from airflow_epochs.retries import TASK_RETRY_DEFAULTS, EpochsRetryPolicy
    from airflow_epochs.sensors import BarrierSensor, SealedPartitionSensor

    start = pendulum.datetime(2024, 1, 1, tz="UTC")
    with DAG("defaults", schedule=None, start_date=start):
        tasks = [
            OpenEpochOperator(task_id="open", pipeline="p", epoch=1),
            VotePartitionOperator(task_id="vote", partition="a", producer="a", attempt_task_id="open"),
            SparkEpochOperator(task_id="spark", application="job.py", partition="a", storage="/tmp/x",
                               attempt_task_id="open"),
            BarrierSensor(task_id="barrier", barrier="b", pipeline="p", epoch=1),
            SealedPartitionSensor(task_id="sealed", pipeline="p", partitions="a", epoch=1),
        ]
        mine = VotePartitionOperator(task_id="mine", partition="a", producer="a", attempt_task_id="open", retries=0,
                                     retry_delay=timedelta(seconds=1))
    for task in tasks:
        assert task.retries == TASK_RETRY_DEFAULTS["retries"] == 4, task.task_id
        assert task.retry_exponential_backoff == 2.0 and task.retry_delay == timedelta(seconds=5)
        assert task.max_retry_delay == timedelta(seconds=60)
        assert isinstance(task.retry_policy, EpochsRetryPolicy)
    assert (mine.retries, mine.retry_delay, mine.retry_exponential_backoff) == (0, timedelta(seconds=1), 2.0)

    with DAG("user_defaults", schedule=None, start_date=start, default_args={"retries": 1, "retry_policy": None}):
        theirs = OpenEpochOperator(task_id="open", pipeline="p", epoch=1)
    assert theirs.retries == 1 and theirs.retry_policy is None


def test_the_retry_policy_fails_definite_answers_and_retries_transient_ones():
    from airflow.sdk.definitions.retry_policy import RetryAction

    from airflow_epochs.retries import EpochsRetryPolicy

    policy = EpochsRetryPolicy()
    assert policy.evaluate(EpochOutOfOrder("epoch 3 before 2"), 1, 5).action == RetryAction.FAIL
    assert policy.evaluate(CoordinationUnavailable("down"), 1, 5).action == RetryAction.RETRY
    assert policy.evaluate(ConnectionLoss(), 1, 5).action == RetryAction.RETRY
    assert policy.evaluate(RuntimeError("job"), 1, 5).action == RetryAction.DEFAULT


def test_coordinated_steps_retry_in_the_try_and_turn_refusals_into_airflow_fail():
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_epochs.operators import RollbackOperator, VotePartitionOperator

    vote = VotePartitionOperator(task_id="vote", partition="a", producer="a", attempt_task_id="open")
    vote.coordination_backoff = Backoff(first=0.01, cap=0.02, budget=5)
    failures = [ConnectionLoss(), CoordinationUnavailable("down")]

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "voted"

    assert vote.coordinated(flaky, what="vote") == "voted"
    with pytest.raises(AirflowFailException, match=r"vote: AttemptSuperseded \(refused\): zombie"):
        vote.coordinated(lambda: (_ for _ in ()).throw(AttemptSuperseded("zombie", attempt=1, current=2)),
                         what="vote")
    # a rollback carries one request id for every try of its task, so a lost answer is retried too:
    # the repeat finds the rollback that committed instead of applying another
    rollback = RollbackOperator(task_id="rollback", pipeline="p", to_epoch=1, reason="test")
    rollback.coordination_backoff = Backoff(first=0.01, cap=0.02, budget=5)
    lost = [OutcomeUnknown("lost", request_id="r")]

    def rolled_back() -> list[int]:
        if lost:
            raise lost.pop(0)
        return [2, 3]

    assert rollback.coordinated(rolled_back, what="rollback") == [2, 3]
