"""Epoch stages as operators: open, vote, arrive at a barrier, close (reconfiguring and rolling back a
pipeline are :mod:`airflow_epochs.operators.changes`).

Operators hold arguments and call the coordination core through :class:`ZooKeeperHook`; the
protocol itself lives in :mod:`airflow_epochs.coordination`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator, conf
from airflow.sdk.exceptions import AirflowSkipException

from airflow_epochs.coordination import (
    DEFAULT_ROOT,
    Attempt,
    EpochAlreadySealed,
    EpochInfo,
    EpochNotOpen,
    PartitionAlreadySealed,
    PipelineConfig,
    SealInfo,
    validate_name,
)
from airflow_epochs.coordination.base.calendar import Calendar
from airflow_epochs.coordination.recipes.barriers.barrier import StragglerPolicy
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.group import current_open_task_id
from airflow_epochs.operators.opening import DEPLOYMENT_ENV, Opening, default_owner, open_in_task, task_request_id
from airflow_epochs.operators.sealed_events import emit_sealed_events
from airflow_epochs.operators.stages import EpochStage, attempt_from_xcom
from airflow_epochs.retries import CoordinationRetries, with_retry_defaults
from airflow_epochs.triggers.barriers import BarrierReleasedTrigger, barrier_result, outcome_payload

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["DEPLOYMENT_ENV", "ArriveAtBarrierOperator", "CloseEpochOperator", "OpenEpochOperator",
           "VotePartitionOperator", "attempt_from_xcom", "cast_vote", "default_owner", "partition_asset",
           "task_request_id"]


def partition_asset(pipeline: str, partition: str) -> Asset:
    """The Airflow asset that stands for a sealed partition; its events carry the epoch as partition key."""
    return Asset(name=f"epochs.{validate_name('pipeline', pipeline)}.{validate_name('partition', partition)}",
                 uri=f"epochs://{pipeline}/{partition}")


class OpenEpochOperator(CoordinationRetries, BaseOperator):
    """Take the pipeline's leadership, wait until the previous epoch is sealed, then open (or resume)
    the epoch and push its context to XCom.

    The epoch is ``epoch`` if given, else the run's data interval through ``calendar``, else the next
    epoch after the frontier (manual runs). When the epoch is already sealed (another deployment ran
    it), the task and therefore the epoch's stages are skipped, with a log line naming who sealed it.
    When another deployment leads, the task waits (deferred) until the epoch is sealed or the leader's
    lease runs out, and then takes over under a new attempt.

    :param pipeline: pipeline name (templated).
    :param epoch: epoch number (templated); optional with ``calendar``.
    :param calendar: maps the run's data interval to an epoch (:class:`EpochCalendar` or
        :class:`CronEpochCalendar`).
    :param config: ``{"partitions": {...}, "barriers": {...}, ...}`` creating the pipeline if missing
        (inside an :class:`~airflow_epochs.operators.EpochGroup`: what its tasks define); a stored
        configuration that differs from it is logged, naming each difference.
    :param from_epoch: schedule ``config`` as a new configuration version from this epoch when the stored
        one differs (see :class:`~airflow_epochs.operators.EpochGroup`).
    :param lease_seconds: leadership lease length; the leader renews it at every open.
    :param backpressure_wait: seconds to wait for slow consumers (a backpressure window in ``config``)
        before failing; ``None`` waits as long as it takes, ``0`` fails at once.
    :param deferrable: wait for the previous epoch, the leader or slow consumers in the triggerer
        (default: Airflow's ``[operators] default_deferrable``); otherwise in the worker, on watches.
    :param owner_id: this deployment's identity (default ``$AIRFLOW_EPOCHS_DEPLOYMENT`` or host name).
    """

    template_fields: Sequence[str] = ("pipeline", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int | str | None = None,
        calendar: Calendar | None = None,
        config: Mapping[str, Any] | None = None,
        from_epoch: int | None = None,
        lease_seconds: float = 600.0,
        backpressure_wait: float | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        owner_id: str | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        if backpressure_wait is not None and (isinstance(backpressure_wait, bool) or
                                              not isinstance(backpressure_wait, (int, float)) or backpressure_wait < 0):
            raise ValueError(f"backpressure_wait must be None or a non-negative number of seconds, "
                             f"not {backpressure_wait!r}")
        self.pipeline = pipeline
        self.epoch = epoch
        self.calendar = calendar
        self.config = None if config is None else PipelineConfig.from_json(config).to_json()  # checked at parse time
        self.from_epoch = from_epoch
        self.lease_seconds = lease_seconds
        self.backpressure_wait = backpressure_wait
        self.deferrable = deferrable
        self.owner_id = owner_id
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def opening(self) -> Opening:
        """This task's settings (rendered) as an :class:`~airflow_epochs.operators.opening.Opening`."""
        return Opening(pipeline=self.pipeline, epoch=self.epoch, calendar=self.calendar, config=self.config,
                       from_epoch=self.from_epoch, lease_seconds=self.lease_seconds,
                       backpressure_wait=self.backpressure_wait, deferrable=self.deferrable, owner_id=self.owner_id,
                       zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)

    def execute(self, context: Context) -> dict[str, Any]:
        deadline = None if self.backpressure_wait is None else time.time() + self.backpressure_wait
        return self.coordinated(lambda: self._open(context, None, deadline),
                                what=f"pipeline {self.pipeline!r}: open epoch")

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        epoch_wanted: int | None = None,
        backpressure_deadline: float | None = None,
    ) -> dict[str, Any]:
        # Woken by the frontier moving, by the consumers catching up or by the wait running out:
        # decide again on fresh state. (The deadline also rides in the backpressure trigger's event:
        # `airflow dags test` resumes with the event only.)
        if backpressure_deadline is None and event:
            backpressure_deadline = event.get("deadline")
        return self.coordinated(lambda: self._open(context, epoch_wanted, backpressure_deadline),
                                what=f"pipeline {self.pipeline!r}: open epoch {epoch_wanted or ''}".rstrip())

    def _open(self, context: Context, epoch: int | None, deadline: float | None) -> dict[str, Any]:
        """Decide, and open, skip or defer (see :func:`~airflow_epochs.operators.opening.open_in_task`)."""
        return open_in_task(self, context, self.opening(), epoch=self.epoch, epoch_wanted=epoch, deadline=deadline,
                            request_id=task_request_id(context), resume_method="execute_complete", log=self.log)


class VotePartitionOperator(EpochStage, CoordinationRetries, BaseOperator):
    """Vote that a producer finished its part of a partition (from a non-Spark task).

    :param partition: partition name (templated).
    :param producer: producer name (templated).
    :param manifest: what the producer wrote (templated): paths, counts, checksums.
    :param snapshot: optional snapshot pointer this epoch leaves for the next (templated).
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    """

    template_fields: Sequence[str] = ("partition", "producer", "manifest", "snapshot")

    def __init__(
        self,
        *,
        partition: str,
        producer: str,
        manifest: Mapping[str, Any] | None = None,
        snapshot: Any = None,
        attempt_task_id: str | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.partition = partition
        self.producer = producer
        self.manifest = manifest
        self.snapshot = snapshot
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = attempt_from_xcom(context, self.attempt_task_id)
        if (absent := self.not_taking_part(context, attempt)) is not None:
            return absent
        return self.coordinated(lambda: self._vote(attempt),
                                what=f"epoch {attempt.epoch}: vote of {self.producer} on {self.partition}")

    def _vote(self, attempt: Attempt) -> dict[str, Any]:
        return cast_vote(self.log, attempt, self.partition, self.producer, dict(self.manifest or {}), self.snapshot,
                         zookeeper_conn_id=self.zookeeper_conn_id, root=self.root)


def cast_vote(log: Any, attempt: Attempt, partition: str, producer: str, manifest: dict[str, Any], snapshot: Any,
              *, zookeeper_conn_id: str, root: str) -> dict[str, Any]:
    """Vote ``producer``'s ``manifest`` on ``partition`` under ``attempt`` (a repeat is a no-op); a partition
    an earlier attempt of the epoch sealed is said, not refused."""
    with ZooKeeperHook(zookeeper_conn_id=zookeeper_conn_id) as hook:
        ledger = hook.ledger(attempt.pipeline, owner=attempt.owner, root=root)
        try:
            result = ledger.vote(attempt, partition, producer, manifest, snapshot=snapshot)
        except PartitionAlreadySealed:
            # Sealed by an earlier attempt of this epoch (e.g. before a takeover): seals are
            # immutable, so this attempt's output for it is never used.
            seal = ledger.seal(attempt.epoch, partition)
            log.info("Epoch %s: partition %s was sealed earlier by attempt %s; nothing to vote",
                     attempt.epoch, partition, seal.attempt if seal else "?")
            return {"partition_sealed": True, "epoch_sealed": False, "sealed_by": seal.attempt if seal else None}
    log.info("Epoch %s: %s voted %s (partition sealed: %s, epoch sealed: %s)", attempt.epoch, producer, partition,
             result.partition_sealed, result.epoch_sealed)
    return {"partition_sealed": result.partition_sealed, "epoch_sealed": result.epoch_sealed}


class ArriveAtBarrierOperator(EpochStage, CoordinationRetries, BaseOperator):
    """Arrive at a barrier of the epoch and, with ``wait=True``, wait (deferred) until it is released.

    Inside one DAG run, prefer ``wait=False`` on the participants and one :class:`BarrierSensor` task
    downstream of them: the run then reads ``[ingest_a, ingest_b] >> barrier >> join`` and no worker
    or triggerer slot is held per participant (and ``airflow dags test``, which runs deferred tasks
    one at a time, can run it).

    :param barrier: barrier name.
    :param participant: who arrives (templated).
    :param policy: ``fail``, ``quorum`` or ``rerun``; with ``quorum`` give ``quorum``.
    :param straggler_timeout: seconds after declaration before the policy applies.
    :param participants: expected participants (default: from the pipeline's configuration).
    :param wait: wait for the release (True) or only record the arrival (False).
    :param deferrable: wait for the release in the triggerer (default: Airflow's
        ``[operators] default_deferrable``); otherwise in the worker, on a watch.
    """

    template_fields: Sequence[str] = ("participant",)

    def __init__(
        self,
        *,
        barrier: str,
        participant: str,
        policy: str = "fail",
        straggler_timeout: float = 3600.0,
        quorum: int | None = None,
        participants: Sequence[str] | None = None,
        attempt_task_id: str | None = None,
        wait: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.wait = wait
        self.barrier = barrier
        self.participant = participant
        self.policy = StragglerPolicy(policy, straggler_timeout, quorum)  # type: ignore[arg-type]
        self.participants = list(participants) if participants is not None else None
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.deferrable = deferrable
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = attempt_from_xcom(context, self.attempt_task_id)
        if (absent := self.not_taking_part(context, attempt)) is not None:
            return absent
        return self.coordinated(lambda: self._arrive(attempt),
                                what=f"epoch {attempt.epoch}: {self.participant} arriving at barrier {self.barrier}")

    def _arrive(self, attempt: Attempt) -> dict[str, Any]:
        with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
            ledger = hook.ledger(attempt.pipeline, owner=attempt.owner, root=self.root)
            barrier = ledger.barrier(attempt.epoch, self.barrier, generation=attempt.generation)
            try:
                barrier.declare(self.policy, self.participants)
                arrival = barrier.arrive(self.participant)
            except EpochNotOpen:
                # Sealed meanwhile (another deployment took the epoch over while this one was stopped): there
                # is nothing left to arrive at, as the open task skips a sealed epoch.
                info = ledger.epoch_info(attempt.epoch)
                if info is None or info.state != "sealed" or info.generation != attempt.generation:
                    raise
                message = (f"Pipeline {attempt.pipeline}: epoch {attempt.epoch} is already sealed by {info.owner} "
                           f"(attempt {info.attempt}); {self.participant} has no barrier to arrive at; skipping")
                self.log.info(message)
                raise AirflowSkipException(message) from None
            self.log.info("Epoch %s: %s arrived at barrier %s (#%s)", attempt.epoch, self.participant,
                          self.barrier, arrival.index)
            outcome = arrival.outcome
            if not self.wait:
                return {"arrived": self.participant, "index": arrival.index,
                        "decision": outcome.decision if outcome else None}
            if outcome is not None or not self.deferrable:
                outcome = outcome or barrier.wait()
                return barrier_result({"pipeline": attempt.pipeline, "epoch": attempt.epoch, "barrier": self.barrier,
                                       **outcome_payload(outcome)})
        self.defer(
            trigger=BarrierReleasedTrigger(pipeline=attempt.pipeline, epoch=attempt.epoch, barrier=self.barrier,
                                           zookeeper_conn_id=self.zookeeper_conn_id, root=self.root),
            method_name="execute_complete",
        )
        raise AssertionError("defer() returns only by raising")  # pragma: no cover

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        return barrier_result(event)


class CloseEpochOperator(CoordinationRetries, BaseOperator):
    """Verify every partition of the epoch is sealed, seal the epoch (advancing the frontier), and emit
    one asset event per sealed partition with the epoch as its partition key.

    :param partitions: partitions whose assets this task emits (see :func:`partition_asset`); the
        pipeline name comes from ``pipeline``.
    :param pipeline: pipeline name, needed with ``partitions``.
    :param attempt_task_id: the task that opened the epoch; defaults to the enclosing EpochGroup's.
    """

    def __init__(
        self,
        *,
        pipeline: str | None = None,
        partitions: Sequence[str] = (),
        attempt_task_id: str | None = None,
        zookeeper_conn_id: str = ZooKeeperHook.default_conn_name,
        root: str = DEFAULT_ROOT,
        **kwargs: Any,
    ) -> None:
        if partitions and not pipeline:
            raise ValueError("CloseEpochOperator needs pipeline= to emit partition assets")
        self.partition_assets = {p: partition_asset(pipeline, p) for p in partitions} if pipeline else {}
        kwargs.setdefault("outlets", list(self.partition_assets.values()))
        super().__init__(**with_retry_defaults(kwargs))
        self.attempt_task_id = attempt_task_id or current_open_task_id()
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def execute(self, context: Context) -> dict[str, Any]:
        attempt = attempt_from_xcom(context, self.attempt_task_id)

        def close() -> tuple[EpochInfo, int, dict[str, SealInfo | None]]:
            with ZooKeeperHook(zookeeper_conn_id=self.zookeeper_conn_id) as hook:
                ledger = hook.ledger(attempt.pipeline, owner=attempt.owner, root=self.root)
                try:
                    info = ledger.close_epoch(attempt)
                except EpochAlreadySealed as sealed:
                    # Another attempt sealed it (a deployment that took the epoch over while this one was
                    # stopped): its run emits the epoch's asset events; this one emits none, so a
                    # downstream DAG runs once per epoch across deployments.
                    if sealed.sealed_by_attempt is None or \
                            (sealed.sealed_by_attempt, sealed.generation) == (attempt.token, attempt.generation):
                        raise
                    message = (f"Pipeline {attempt.pipeline}: epoch {attempt.epoch} was sealed by "
                               f"{sealed.sealed_by_owner} (attempt {sealed.sealed_by_attempt}), not by attempt "
                               f"{attempt.token}; skipping, no asset event")
                    self.log.info(message)
                    raise AirflowSkipException(message) from None
                return info, ledger.frontier(), {p: ledger.seal(attempt.epoch, p) for p in self.partition_assets}

        info, frontier, seals = self.coordinated(
            close, what=f"pipeline {attempt.pipeline!r}: close epoch {attempt.epoch}")
        emit_sealed_events(context, attempt, self.partition_assets, seals)
        self.log.info("Pipeline %s: epoch %s sealed; frontier %s", attempt.pipeline, attempt.epoch, frontier)
        return {"epoch": info.epoch, "frontier": frontier, "partitions": list(info.sealed_partitions)}
