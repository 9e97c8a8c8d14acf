"""EpochGroup: a task group that reads like ``open >> [ingest_a, ingest_b] >> barrier >> join >> seal``, and
whose tasks define the pipeline.

Inside the group, epoch operators find the group's open task by themselves (no XCom wiring by hand), and
at the end of the ``with`` block the group collects from its tasks what the pipeline is: the partitions
and their producers (each Spark job, vote or TaskFlow producer), the barriers and their participants, and
what each task reads (see :mod:`airflow_epochs.operators.definition`)::

    with EpochGroup("epoch", pipeline="flights", calendar=DAILY) as epoch:
        ingest = [VotePartitionOperator(task_id=p, partition=p, producer=p) for p in ("a", "b")]
        epoch.barrier("ingested", ingest) >> VotePartitionOperator(task_id="join", partition="c", producer="join")

The open task comes before the group's first tasks and the close task after its last ones (wired by the
group when the DAG does not wire them itself); with ``inline_stages=True`` the first tasks open the epoch
and the last one closes it, with no task of their own (:mod:`airflow_epochs.operators.stages`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import TaskGroup, conf

from airflow_epochs.operators.definition import DefinitionMismatch, check_config, check_reads, collect

if TYPE_CHECKING:
    from airflow_epochs.coordination import PipelineConfig
    from airflow_epochs.operators.definition import PipelineDefinition
    from airflow_epochs.operators.epoch import CloseEpochOperator, OpenEpochOperator
    from airflow_epochs.operators.stages import Arrival

__all__ = ["EpochGroup", "current_open_task_id"]

# The open task of the EpochGroup being defined (DAG parse time), for the stages inside it.
_OPEN_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("airflow_epochs_open_task", default=None)
#: What an inline group's tasks are given as their open task while it is defined: replaced at its end.
INLINE_OPEN = "__inline_open__"
# Settings of the open task that an inline group's first tasks take instead.
_OPEN_SETTINGS = ("epoch", "calendar", "lease_seconds", "backpressure_wait", "deferrable", "owner_id",
                  "zookeeper_conn_id", "root")


def current_open_task_id() -> str | None:
    """The open task of the innermost EpochGroup being defined, if any (used at DAG parse time)."""
    return _OPEN_TASK.get()


@contextmanager
def open_task_scope(task_id: str) -> Iterator[None]:
    """Within the block, epoch stages default to ``task_id`` as the task that opened their epoch."""
    token = _OPEN_TASK.set(task_id)
    try:
        yield
    finally:
        _OPEN_TASK.reset(token)


class _NoTask:
    """``epoch.open`` and ``epoch.close`` of an inline group: wiring to them is wiring to nothing."""

    def __init__(self, role: str) -> None:
        self.role = role

    def __rshift__(self, other: Any) -> Any:
        return other

    def __lshift__(self, other: Any) -> Any:
        return other

    def __rrshift__(self, other: Any) -> Any:
        return self

    def __rlshift__(self, other: Any) -> Any:
        return self

    def __repr__(self) -> str:
        return f"<inline {self.role}: done by the group's own tasks>"


class EpochGroup(TaskGroup):
    """A TaskGroup whose tasks define a pipeline and run as the stages of its epoch: an ``open``
    (OpenEpochOperator) before them and a ``close`` (CloseEpochOperator) after them, or, with
    ``inline_stages``, the opening and closing done inside the first and last tasks.

    :param group_id: the group's id.
    :param pipeline: pipeline name.
    :param config: optional: the pipeline's configuration (partitions, barriers, window, retention, ...).
        The partitions and barriers the tasks declare are the pipeline's; a ``config`` naming them too is
        checked against the tasks when the DAG is parsed (a difference is a DAG import error naming both
        sides); its other settings are kept.
    :param from_epoch: when the DAG changes the definition of a pipeline that exists: the first epoch the
        new definition applies to (a new configuration version from there, scheduled by the open; it must
        not be opened yet). Without it, a stored configuration that differs from the DAG's is logged as a
        warning naming the difference, and the stored one applies.
    :param inline_stages: open the epoch in the group's first tasks, arrive at barriers inside the
        producers, wait for barriers inside the tasks after them and close in the last task, instead of
        tasks of their own (fewer Airflow hops per epoch; every promise holds). The first and last tasks
        must then be epoch operators, and the group must have one last task.
    :param close_partitions: partitions whose asset events the closing emits (default: all).
    :param open_kwargs: further arguments of the opening (calendar, lease_seconds, deferrable, epoch, ...).
    """

    def __init__(
        self,
        group_id: str,
        *,
        pipeline: str,
        config: Mapping[str, Any] | None = None,
        from_epoch: int | None = None,
        inline_stages: bool = False,
        close_partitions: Sequence[str] | None = None,
        open_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._scope: contextlib.ExitStack | None = None
        self._depth = 0  # how deep the group is entered (epoch.barrier enters it again)
        self._ready = False  # its own open and close exist: the block that follows defines the pipeline
        super().__init__(group_id, **kwargs)
        from airflow_epochs.operators.epoch import CloseEpochOperator, OpenEpochOperator

        if from_epoch is not None and (isinstance(from_epoch, bool) or not isinstance(from_epoch, int)
                                       or from_epoch < 1):
            raise ValueError(f"EpochGroup {group_id!r}: from_epoch must be an epoch number (1 or more), "
                             f"not {from_epoch!r}")
        self.pipeline = pipeline
        self.given_config = dict(config) if config is not None else None
        self.from_epoch = from_epoch
        self.inline_stages = inline_stages
        self.close_partitions = list(close_partitions) if close_partitions is not None else None
        self.open_kwargs = dict(open_kwargs or {})
        self.barriers: dict[str, list[Arrival]] = {}
        self.definition: PipelineDefinition | None = None
        self.pipeline_config: PipelineConfig | None = None
        self.open: OpenEpochOperator | _NoTask
        self.close: CloseEpochOperator | _NoTask
        if inline_stages:
            unknown = set(self.open_kwargs) - set(_OPEN_SETTINGS)
            if unknown:
                raise ValueError(f"EpochGroup {group_id!r}: open_kwargs {sorted(unknown)} are not settings of an "
                                 f"inline opening ({sorted(_OPEN_SETTINGS)})")
            self.open, self.close = _NoTask("open"), _NoTask("close")
        else:
            with self:  # its config is what the tasks define, given at the end of the block
                self.open = OpenEpochOperator(task_id="open", pipeline=pipeline, **self.open_kwargs)
                self.close = CloseEpochOperator(task_id="close", pipeline=pipeline, partitions=(),
                                                attempt_task_id=self.open.task_id)
        self._ready = True

    def barrier(self, name: str, participants: Sequence[Any], *, policy: str = "fail",
                straggler_timeout: float = 3600.0, quorum: int | None = None, sensor: type | None = None,
                task_id: str | None = None, **sensor_kwargs: Any) -> Any:
        """A barrier of the epoch that ``participants`` (epoch operators, or TaskFlow calls of them) arrive at
        once their work is done; returns what to wire the tasks after it to (``epoch.barrier(...) >> join``).

        With the group's stage tasks, an ``ArriveAtBarrierOperator`` (``wait=False``) follows each participant;
        with ``inline_stages``, each participant arrives inside its own task. The tasks wired after the
        barrier wait for its release before their work, inside their own task; or, given ``sensor`` (e.g.
        :class:`~airflow_epochs.sensors.BarrierSensor`) and not inline, one deferrable task of that class
        named ``task_id`` (default: the barrier's name) waits after the arrivals.

        :param participants: the producers that arrive (each as its ``producer``, else its task id).
        :param policy: the straggler policy (``fail``, ``quorum`` or ``rerun``); ``straggler_timeout`` and
            ``quorum`` as for :class:`~airflow_epochs.operators.ArriveAtBarrierOperator`.
        :param sensor_kwargs: further arguments of the sensor (default: deferrable, poke every second, timing
            out after ``straggler_timeout``).
        """
        from airflow_epochs.coordination.recipes.barriers.barrier import StragglerPolicy
        from airflow_epochs.operators.epoch import ArriveAtBarrierOperator
        from airflow_epochs.operators.stages import Arrival

        tasks = [getattr(p, "operator", None) or p for p in participants]
        names = [str(getattr(t, "producer", None) or t.task_id) for t in tasks]
        if self.inline_stages:
            stage_policy = StragglerPolicy(policy, straggler_timeout, quorum)  # type: ignore[arg-type]
            for task, participant in zip(tasks, names, strict=True):
                self.barriers.setdefault(name, []).append(Arrival(name, participant, stage_policy))
                task.stage_arrivals = [*getattr(task, "stage_arrivals", ()), (name, participant)]
            return _Released(name, tasks)
        with self:
            arrivals = []
            for task, participant in zip(tasks, names, strict=True):
                arrive = ArriveAtBarrierOperator(task_id=f"{task.task_id.rsplit('.', 1)[-1]}_arrives", barrier=name,
                                                 participant=participant, policy=policy, quorum=quorum,
                                                 straggler_timeout=straggler_timeout, wait=False)
                task >> arrive
                arrivals.append(arrive)
            if sensor is None:
                return _Released(name, arrivals)
            waiting = sensor(task_id=task_id or name, barrier=name, **{
                "deferrable": True, "poke_interval": 1, "timeout": straggler_timeout, **sensor_kwargs})
            arrivals >> waiting
        return waiting

    def __enter__(self) -> EpochGroup:
        group = super().__enter__()
        self._depth += 1
        if self._ready and self._depth == 1:
            self._scope = contextlib.ExitStack()
            self._scope.enter_context(open_task_scope(INLINE_OPEN if isinstance(self.open, _NoTask)
                                                      else self.open.task_id))
        return group  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        outermost = self._depth == 0
        if outermost and self._scope is not None:
            self._scope.close()
            self._scope = None
        super().__exit__(*exc)  # type: ignore[no-untyped-call]  # TaskGroup.__exit__ is unannotated
        if outermost and self._ready and exc[0] is None and self.definition is None:
            self._define()

    # -- at the end of the block: what the tasks define -----------------------------------------------

    def _stage_tasks(self) -> list[Any]:
        return [t for t in self.iter_tasks() if t is not self.open and t is not self.close]

    def _define(self) -> None:
        where = f"EpochGroup {self.group_id!r} of pipeline {self.pipeline!r}"
        tasks = self._stage_tasks()
        try:
            found = collect(tasks, lenient=self.given_config is not None)
            if self.given_config is not None:
                check_config(found, self.given_config, where=where)
            config = found.config(self.given_config)
            check_reads(found, config, where=where)
        except DefinitionMismatch as exc:
            raise DefinitionMismatch(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
        self.definition, self.pipeline_config = found, config
        partitions = self.close_partitions if self.close_partitions is not None else list(config.partitions)
        if self.inline_stages:
            self._inline(tasks, config, partitions)
        else:
            self._wire(tasks, config, partitions)

    def _wire(self, tasks: list[Any], config: PipelineConfig, partitions: list[str]) -> None:
        from airflow_epochs.operators.epoch import partition_asset

        assert not isinstance(self.open, _NoTask) and not isinstance(self.close, _NoTask)
        self.open.config = config.to_json()
        self.open.from_epoch = self.from_epoch
        self.close.partition_assets = {p: partition_asset(self.pipeline, p) for p in partitions}
        self.close.outlets = [*self.close.outlets, *[a for a in self.close.partition_assets.values()
                                                      if a not in self.close.outlets]]
        from airflow_epochs.operators.stages import InlineStage

        for task, waits in self._waits(tasks).items():
            task.epoch_stage = InlineStage(scope=str(self.group_id), waits=waits,
                                           zookeeper_conn_id=self.open.zookeeper_conn_id, root=self.open.root)
        after_close = self.close.get_flat_relative_ids(upstream=False)
        ids = {t.task_id for t in tasks}
        with self:
            for task in tasks:
                if not (task.upstream_task_ids & (ids | {self.open.task_id})):
                    self.open >> task
                if not (task.downstream_task_ids & (ids | {self.close.task_id})) and task.task_id not in after_close:
                    task >> self.close

    def _inline(self, tasks: list[Any], config: PipelineConfig, partitions: list[str]) -> None:
        from airflow_epochs.operators.epoch import partition_asset
        from airflow_epochs.operators.opening import Opening
        from airflow_epochs.operators.stages import EpochStage, InlineStage

        where = f"EpochGroup {self.group_id!r} (inline_stages)"
        ids = {t.task_id for t in tasks}
        firsts = [t for t in tasks if not (t.upstream_task_ids & ids)]
        lasts = [t for t in tasks if not (t.downstream_task_ids & ids)]
        for role, chosen in (("first", firsts), ("last", lasts)):
            plain = [t.task_id for t in chosen if not isinstance(t, EpochStage)]
            if plain:
                raise DefinitionMismatch(f"{where}: {plain} {'are' if len(plain) > 1 else 'is'} a {role} task of the "
                                         "group but not an epoch operator, so it cannot "
                                         f"{'open' if role == 'first' else 'close'} the epoch (and would run "
                                         f"{'before the previous epoch is sealed' if role == 'first' else 'after'}"
                                         "); make it one, or leave inline_stages off")
        if len(lasts) != 1:
            raise DefinitionMismatch(f"{where}: the last task closes the epoch, but {sorted(t.task_id for t in lasts)} "
                                     "all end the group; give it one last task, or leave inline_stages off")
        settings = dict(self.open_kwargs)
        settings.setdefault("deferrable", conf.getboolean("operators", "default_deferrable", fallback=False))
        first_ids = {t.task_id for t in firsts}
        conn = settings.get("zookeeper_conn_id", "zookeeper_default")
        root = settings.get("root", "/airflow-epochs")
        opening = Opening(pipeline=self.pipeline, config=config.to_json(), from_epoch=self.from_epoch, **settings)
        waits = self._waits(tasks)
        for task in tasks:
            stage = InlineStage(scope=str(self.group_id), zookeeper_conn_id=conn, root=root,
                                arrivals=[a for arrivals in self.barriers.values() for a in arrivals
                                          if (a.barrier, a.participant) in set(getattr(task, "stage_arrivals", ()))],
                                waits=waits.get(task, []))
            if task.task_id in first_ids:
                stage.opening = opening
            else:
                stage.attempt_from = _ancestor_in(task, first_ids)
            if task is lasts[0]:
                stage.closes = {p: partition_asset(self.pipeline, p) for p in partitions}
                task.outlets = [*task.outlets, *[a for a in stage.closes.values() if a not in task.outlets]]
            if getattr(task, "attempt_task_id", None) == INLINE_OPEN:
                task.attempt_task_id = stage.attempt_from or task.task_id
            task.epoch_stage = stage

    def _waits(self, tasks: list[Any]) -> dict[Any, list[str]]:
        """Task -> the barriers it waits for inside itself (wired after ``epoch.barrier(...)``)."""
        from airflow_epochs.operators.stages import EpochStage

        waits: dict[Any, list[str]] = {}
        for task in tasks:
            for barrier in getattr(task, "stage_waits", ()):
                if not isinstance(task, EpochStage):
                    raise DefinitionMismatch(f"task {task.task_id!r} runs after barrier {barrier!r} but is not an "
                                             "epoch operator, so it cannot wait for its release itself: give "
                                             "epoch.barrier(..., sensor=BarrierSensor)")
                waits.setdefault(task, []).append(barrier)
        return waits


class _Released:
    """What ``epoch.barrier(...)`` returns without a sensor: the tasks wired after it run after ``before`` (the
    participants, or their arrival tasks) and wait for the barrier's release inside their own task."""

    def __init__(self, name: str, before: list[Any]) -> None:
        self.name, self.participants = name, before

    def _after(self, other: Any) -> Any:
        for item in other if isinstance(other, (list, tuple)) else [other]:
            task: Any = getattr(item, "operator", None) or item
            task.stage_waits = [*getattr(task, "stage_waits", ()), self.name]
            for participant in self.participants:
                participant >> task
        return other

    def __rshift__(self, other: Any) -> Any:
        return self._after(other)

    def __rrshift__(self, other: Any) -> Any:
        raise TypeError("wire the participants through epoch.barrier(name, participants), not into it")


def _ancestor_in(task: Any, ids: set[str]) -> str:
    """A first task of the group that ``task`` runs after (its XCom holds the epoch's attempt)."""
    ancestors = task.get_flat_relative_ids(upstream=True)
    found = sorted(ancestors & ids)
    if not found:
        raise DefinitionMismatch(f"task {task.task_id!r} runs after none of its group's first tasks")
    return str(found[0])
