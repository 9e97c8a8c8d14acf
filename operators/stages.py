"""Epoch stages inside the tasks that do the work: how a task of an :class:`~airflow_epochs.operators.EpochGroup`
finds its epoch's attempt, whether it takes part in the epoch, and (with ``inline_stages=True``) the opening,
the barrier arrivals and waits, and the closing done inside the group's own tasks instead of tasks of
their own.

With inline stages every promise holds as with the stage tasks: the group's first tasks open the epoch
before their work (each with the run's one opening request, so they share one attempt, and each waits,
deferred, until the previous epoch is sealed); a producer arrives at its barriers after its vote, and a
task downstream of a barrier waits for its release before its work; the group's last task closes the epoch
after its own work and emits the partitions' asset events. Only the number of Airflow tasks per epoch
changes (the nycflights DAG: 3 instead of 8, 2 in a row instead of 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_epochs.coordination import Attempt, EpochAlreadySealed, EpochIncomplete, EpochNotOpen, SealInfo
from airflow_epochs.coordination.recipes.barriers.barrier import BarrierOutcome, StragglerPolicy
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.opening import Opening, open_in_task, task_request_id
from airflow_epochs.operators.sealed_events import emit_sealed_events
from airflow_epochs.retries import CoordinationRetries
from airflow_epochs.triggers.barriers import BarrierReleasedTrigger, barrier_result, outcome_payload

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

__all__ = ["ATTEMPT_KEY", "Arrival", "EpochStage", "InlineStage", "attempt_from_xcom", "epoch_xcom"]

#: The XCom key under which an inline group's first tasks leave the epoch's attempt for the others.
ATTEMPT_KEY = "epoch_attempt"


@dataclass(frozen=True)
class Arrival:
    """A barrier a task arrives at after its work, as ``participant``."""

    barrier: str
    participant: str
    policy: StragglerPolicy = field(default_factory=lambda: StragglerPolicy("fail", 3600.0))
    participants: tuple[str, ...] | None = None


@dataclass
class InlineStage:
    """What an inline EpochGroup asks of one of its tasks (set at parse time).

    :param scope: the group's id: the opening request of a run is the run's and this scope's.
    :param opening: set on the group's first tasks: they open the epoch.
    :param attempt_from: the other tasks: the first task whose XCom (``ATTEMPT_KEY``) holds the attempt.
    :param arrivals: barriers the task arrives at after its work.
    :param waits: barriers that must be released before its work.
    :param closes: set on the group's last task: the partitions whose asset events it emits on closing.
    """

    scope: str
    opening: Opening | None = None
    attempt_from: str | None = None
    arrivals: list[Arrival] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)
    closes: dict[str, Asset] | None = None
    zookeeper_conn_id: str = ZooKeeperHook.default_conn_name
    root: str = "/airflow-epochs"


def epoch_xcom(context: Context, task_id: str | None) -> Mapping[str, Any]:
    """The XCom the epoch's opening left (the attempt, its snapshots and the definition it runs under),
    read once per try of the task."""
    task = context.get("task")
    known = getattr(task, "_epoch_xcom", None)
    if isinstance(known, Mapping):
        return known  # opened by this task, or read already in this try
    stage = getattr(task, "epoch_stage", None)
    key = None
    if stage is not None and stage.attempt_from is not None:
        task_id, key = stage.attempt_from, ATTEMPT_KEY
    # Both are definite (a retry reads the same XCom): fail without Airflow retries.
    if not task_id:
        raise AirflowFailException("no attempt_task_id given and the task is not inside an EpochGroup")
    value = context["ti"].xcom_pull(task_ids=task_id, key=key) if key else context["ti"].xcom_pull(task_ids=task_id)
    if not isinstance(value, Mapping):
        raise AirflowFailException(f"task {task_id!r} pushed no epoch attempt to XCom (got {value!r})")
    if task is not None:
        task._epoch_xcom = value  # type: ignore[union-attr]  # a mapped task is unmapped before it runs
    return value


def attempt_from_xcom(context: Context, task_id: str | None) -> Attempt:
    """The attempt of the epoch this task works in: from the open task's XCom (``task_id``), or, in an
    inline EpochGroup, opened by this task (a first task; it may defer until the previous epoch is sealed)
    or from the first task's XCom; then, with inline stages, once the barriers it waits for are released."""
    task = context.get("task")
    if isinstance(task, EpochStage) and task.epoch_stage is not None:
        return task.stage_attempt(context)
    return Attempt.from_dict(epoch_xcom(context, task_id))


class EpochStage(CoordinationRetries):
    """The part of an epoch operator that an inline EpochGroup fills in (see the module's description),
    and the check that the task takes part in its epoch.

    A producer or participant the epoch's configuration version does not name (one the DAG's definition
    adds from a later epoch, ``EpochGroup(from_epoch=N)``) does nothing in that epoch and succeeds,
    saying so, so that the epoch's other stages run as before (:meth:`not_taking_part`).
    """

    #: Set by an inline EpochGroup at parse time (None: the stage tasks of a group do it).
    epoch_stage: InlineStage | None = None
    # The operator's own (a mixin of BaseOperator subclasses: the metaclass's __init__ would not chain).
    task_id: str
    defer: Any
    execute: Any
    render_template: Any
    # Set while the task runs (one try, one process).
    _epoch_xcom: Mapping[str, Any] | None = None
    _stage_attempt: Attempt | None = None
    _stage_resume: Mapping[str, Any] | None = None

    def stage_attempt(self, context: Context) -> Attempt:
        """The attempt under an inline stage: opened here, or from the first task's XCom; then the waits."""
        stage = self.epoch_stage
        assert stage is not None
        if stage.opening is not None:
            resumed = self._stage_resume or {}
            opening = stage.opening
            task: Any = self  # a mixin of BaseOperator subclasses
            opened = self.coordinated(
                lambda: open_in_task(task, context, opening, epoch=self.render_template(opening.epoch, context),
                                     epoch_wanted=resumed.get("epoch_wanted"),
                                     deadline=resumed.get("backpressure_deadline"),
                                     request_id=task_request_id(context, scope=f"{stage.scope}.open"),
                                     resume_method="resume_epoch_stage", log=self.log),
                what=f"pipeline {opening.pipeline!r}: open the epoch of {self.task_id}")
            self._epoch_xcom = opened
            context["ti"].xcom_push(key=ATTEMPT_KEY, value=opened)
            attempt = Attempt.from_dict(opened)
        else:  # from the first task (inline), or from the group's open task
            attempt = Attempt.from_dict(epoch_xcom(context, getattr(self, "attempt_task_id", None)))
        self._stage_attempt = attempt
        for barrier in stage.waits:
            self._stage_wait(attempt, barrier, stage)
        return attempt

    def _stage_wait(self, attempt: Attempt, name: str, stage: InlineStage) -> None:
        def decided() -> BarrierOutcome | None:
            with ZooKeeperHook(zookeeper_conn_id=stage.zookeeper_conn_id) as hook:
                barrier = hook.ledger(attempt.pipeline, owner=attempt.owner, root=stage.root).barrier(
                    attempt.epoch, name, generation=attempt.generation)
                return barrier.outcome() or barrier.apply_policy()

        outcome = self.coordinated(decided, what=f"epoch {attempt.epoch}: barrier {name}")
        if outcome is not None:
            barrier_result({"pipeline": attempt.pipeline, "epoch": attempt.epoch, "barrier": name,
                            **outcome_payload(outcome)})
            self.log.info("Epoch %s: barrier %s released (%s)", attempt.epoch, name, outcome.decision)
            return
        self.log.info("Epoch %s: waiting for barrier %s to be released", attempt.epoch, name)
        self.defer(trigger=BarrierReleasedTrigger(pipeline=attempt.pipeline, epoch=attempt.epoch, barrier=name,
                                                  zookeeper_conn_id=stage.zookeeper_conn_id, root=stage.root),
                   method_name="resume_epoch_stage")

    def resume_epoch_stage(self, context: Context, event: Any = None, **kwargs: Any) -> Any:
        """Back from a wait of an inline stage (the previous epoch sealed, consumers caught up, a barrier
        released): decide again and run the task."""
        self._stage_resume = kwargs
        return self.execute(context)

    def not_taking_part(self, context: Context, attempt: Attempt) -> dict[str, Any] | None:
        """None when this task's producer (or participant) is in the epoch's configuration version; else
        the task's result for an epoch it has no part in (logged)."""
        try:
            definition = epoch_xcom(context, getattr(self, "attempt_task_id", None)).get("definition")
        except AirflowFailException:
            return None
        if not isinstance(definition, Mapping):
            return None  # an open task of an earlier release: no definition to check against
        partition, producer = getattr(self, "partition", None), getattr(self, "producer", None)
        if partition is not None and producer is not None:
            members = definition.get("partitions", {}).get(partition)
            if members is not None and producer not in members:
                return self._stage_absent(attempt, f"producer {producer!r} of partition {partition!r}", members)
        barrier, participant = getattr(self, "barrier", None), getattr(self, "participant", None)
        if barrier is not None and participant is not None:
            explicit = getattr(self, "participants", None)  # an arrival's own list wins over the configuration's
            members = explicit if explicit is not None else definition.get("barriers", {}).get(barrier)
            if members is not None and participant not in members:
                return self._stage_absent(attempt, f"participant {participant!r} of barrier {barrier!r}", members)
        return None

    def _stage_absent(self, attempt: Attempt, who: str, members: Sequence[str]) -> dict[str, Any]:
        self.log.warning("Epoch %s runs under configuration version %s, whose %s are %s: %s takes no part in it; "
                         "nothing was run (the DAG's definition names it from a later epoch)", attempt.epoch,
                         attempt.config_version, who.split(" ", 1)[0] + "s", sorted(members), who)
        return {"epoch": attempt.epoch, "taking_part": False, "config_version": attempt.config_version}

    def post_execute(self, context: Any, result: Any = None) -> None:
        """After the task's own work, under an inline stage: its barrier arrivals, then (the last task) the
        closing of the epoch with the partitions' asset events."""
        stage = self.epoch_stage
        attempt: Attempt | None = getattr(self, "_stage_attempt", None)
        if stage is None or attempt is None:
            return
        if stage.arrivals and self.not_taking_part(context, attempt) is None:
            self.coordinated(lambda: self._stage_arrive(attempt, stage),
                             what=f"epoch {attempt.epoch}: {self.task_id} arriving at its barriers")
        closes = stage.closes
        if closes is not None:
            seals, frontier = self.coordinated(lambda: self._stage_close(attempt, closes, stage),
                                               what=f"pipeline {attempt.pipeline!r}: close epoch {attempt.epoch}")
            emit_sealed_events(context, attempt, closes, seals)
            self.log.info("Pipeline %s: epoch %s sealed; frontier %s", attempt.pipeline, attempt.epoch, frontier)

    def _stage_arrive(self, attempt: Attempt, stage: InlineStage) -> None:
        with ZooKeeperHook(zookeeper_conn_id=stage.zookeeper_conn_id) as hook:
            ledger = hook.ledger(attempt.pipeline, owner=attempt.owner, root=stage.root)
            for arrival in stage.arrivals:
                barrier = ledger.barrier(attempt.epoch, arrival.barrier, generation=attempt.generation)
                try:
                    barrier.declare(arrival.policy, arrival.participants)
                    done = barrier.arrive(arrival.participant)
                except EpochNotOpen:
                    self.log.info("Epoch %s: sealed meanwhile; %s has no barrier %s to arrive at", attempt.epoch,
                                  arrival.participant, arrival.barrier)
                    return
                self.log.info("Epoch %s: %s arrived at barrier %s (#%s)", attempt.epoch, arrival.participant,
                              arrival.barrier, done.index)

    def _stage_close(self, attempt: Attempt, assets: Mapping[str, Asset],
               stage: InlineStage) -> tuple[dict[str, SealInfo | None], int]:
        with ZooKeeperHook(zookeeper_conn_id=stage.zookeeper_conn_id) as hook:
            ledger = hook.ledger(attempt.pipeline, owner=attempt.owner, root=stage.root)
            try:
                ledger.close_epoch(attempt)
            except EpochAlreadySealed as sealed:
                if sealed.sealed_by_attempt is None or \
                        (sealed.sealed_by_attempt, sealed.generation) == (attempt.token, attempt.generation):
                    raise
                # Sealed by another attempt (a deployment that took the epoch over): its run emits the events.
                raise AirflowSkipException(f"Pipeline {attempt.pipeline}: epoch {attempt.epoch} was sealed by "
                                           f"{sealed.sealed_by_owner} (attempt {sealed.sealed_by_attempt}); "
                                           "no asset event") from None
            except EpochIncomplete as missing:
                raise AirflowFailException(f"{self.task_id} closes epoch {attempt.epoch} as the last task of its "
                                           f"group, but {missing}") from None
            return {p: ledger.seal(attempt.epoch, p) for p in assets}, ledger.frontier()
