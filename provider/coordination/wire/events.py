"""The history's events, one frozen record per kind: what each state change records, written by the
change itself (``ctx.event(EpochOpened(...))``) and read by attribute (``event.record``).

The detail is stored as a JSON object (:class:`~.nodes.EventNode`); this module is the one place that
turns it into a record and back. A field an older writer did not store reads as its default, and a
kind this version does not know reads as :class:`UnknownEvent`, so the history of any version stays
readable.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_epochs.coordination.base.errors import CorruptPayload


class EventRecord:
    """The typed detail of one kind of history event; ``epoch`` is the epoch it is about (None for a
    pipeline-wide event)."""

    kind: ClassVar[str]
    epoch: int | None = None
    # field -> its key in the stored object, where the two differ
    stored_as: ClassVar[Mapping[str, str]] = {}

    def to_detail(self) -> dict[str, Any]:
        """The JSON object stored in the event's znode."""
        return {self.stored_as.get(f.name, f.name): _to_json(getattr(self, f.name))
                for f in dataclasses.fields(self)}  # type: ignore[arg-type]


# -- the pipeline ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelineCreated(EventRecord):
    kind: ClassVar[str] = "pipeline_created"
    first_epoch: int = 0
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigSet(EventRecord):
    kind: ClassVar[str] = "config_set"
    from_epoch: int = 0
    version: int = 0
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rollback(EventRecord):
    """Every epoch after ``to_epoch`` undone; ``epochs`` maps each (as a string, a JSON key) to its
    ``state``, ``attempt`` and ``generation`` when it was undone; ``request`` is the rollback's request
    id (what a table's rollback snapshot records)."""

    kind: ClassVar[str] = "rollback"
    to_epoch: int = -1
    from_frontier: int = -1
    epochs: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""
    owner: str = ""
    request: str = ""  # the rollback's request id ("" in events written before it was stored)


@dataclass(frozen=True)
class Compacted(EventRecord):
    kind: ClassVar[str] = "compacted"
    from_epoch: int = 0
    to_epoch: int = 0
    retain_epochs: int = 0


# -- epochs and attempts ---------------------------------------------------------------------


@dataclass(frozen=True)
class EpochOpened(EventRecord):
    kind: ClassVar[str] = "epoch_opened"
    epoch: int
    attempt: int = 0
    owner: str = ""
    config_version: int = 0
    generation: int = 0


@dataclass(frozen=True)
class AttemptStarted(EventRecord):
    """A new attempt took over an open epoch: ``superseded`` is the attempt it replaced and
    ``previous_state`` the epoch's state then."""

    kind: ClassVar[str] = "attempt_started"
    epoch: int
    attempt: int = 0
    owner: str = ""
    superseded: int = 0
    previous_state: str = ""
    generation: int = 0


@dataclass(frozen=True)
class AttemptAborted(EventRecord):
    kind: ClassVar[str] = "attempt_aborted"
    epoch: int
    attempt: int = 0
    owner: str = ""
    reason: str = ""


@dataclass(frozen=True)
class PartitionSealed(EventRecord):
    """A partition sealed; ``producer_count`` is how many producers' votes the seal counts (stored as
    ``producers``, as the seal stores it)."""

    kind: ClassVar[str] = "partition_sealed"
    stored_as: ClassVar[Mapping[str, str]] = {"producer_count": "producers"}
    epoch: int
    partition: str = ""
    attempt: int = 0
    producer_count: int = 0
    first_vote_at: float | None = None
    generation: int = 0


@dataclass(frozen=True)
class EpochSealed(EventRecord):
    kind: ClassVar[str] = "epoch_sealed"
    epoch: int
    attempt: int = 0
    owner: str = ""
    frontier: int = 0
    generation: int = 0


# -- recipes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerRegistered(EventRecord):
    kind: ClassVar[str] = "consumer_registered"
    consumer: str = ""
    acked: int = 0


@dataclass(frozen=True)
class ConsumerUnregistered(EventRecord):
    kind: ClassVar[str] = "consumer_unregistered"
    consumer: str = ""


@dataclass(frozen=True)
class LeaderChanged(EventRecord):
    kind: ClassVar[str] = "leader_changed"
    owner: str = ""
    previous: str | None = None


@dataclass(frozen=True)
class LeaderReleased(EventRecord):
    kind: ClassVar[str] = "leader_released"
    owner: str = ""


@dataclass(frozen=True)
class BarrierDeclared(EventRecord):
    kind: ClassVar[str] = "barrier_declared"
    epoch: int
    barrier: str = ""
    policy: Mapping[str, Any] = field(default_factory=dict)
    participants: int = 0


@dataclass(frozen=True)
class BarrierReleased(EventRecord):
    """A barrier's decision: ``late`` names the first stragglers, ``late_count`` counts them all."""

    kind: ClassVar[str] = "barrier_released"
    epoch: int
    barrier: str = ""
    decision: str = ""
    late: tuple[str, ...] = ()
    late_count: int = 0
    arrived: int = 0


@dataclass(frozen=True)
class BarrierStragglers(EventRecord):
    kind: ClassVar[str] = "barrier_stragglers"
    epoch: int
    barrier: str = ""
    late: tuple[str, ...] = ()
    late_count: int = 0
    policy: str = ""


@dataclass(frozen=True)
class DeliveryScopeRetired(EventRecord):
    kind: ClassVar[str] = "delivery_scope_retired"
    scope: str = ""
    cursors: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ResealOpened(EventRecord):
    """A new version of a sealed (epoch, partition) opened: asked for (``correction`` is its own) or
    opened by a correction that made the seal stale."""

    kind: ClassVar[str] = "reseal_opened"
    epoch: int
    partition: str = ""
    version: int = 0
    correction: str = ""
    reason: str = ""
    request: str = ""


@dataclass(frozen=True)
class VersionSealed(EventRecord):
    kind: ClassVar[str] = "version_sealed"
    epoch: int
    partition: str = ""
    version: int = 0
    correction: str = ""


@dataclass(frozen=True)
class CorrectionPlanned(EventRecord):
    """A correction's stale seals, found from the lineage vectors (``plan``: ``epoch:partition``)."""

    kind: ClassVar[str] = "correction_planned"
    epoch: int
    correction: str = ""
    plan: tuple[str, ...] = ()


@dataclass(frozen=True)
class CorrectionDone(EventRecord):
    kind: ClassVar[str] = "correction_done"
    epoch: int
    correction: str = ""
    resealed: int = 0


@dataclass(frozen=True)
class DeadlineMissed(EventRecord):
    """A partition passed its deadline unsealed: the one alert of (epoch, partition), naming the
    producers it still waited for."""

    kind: ClassVar[str] = "deadline_missed"
    epoch: int
    partition: str = ""
    deadline_at: float = 0.0
    missing: tuple[str, ...] = ()
    raised_by: str = ""


@dataclass(frozen=True)
class SealedLate(EventRecord):
    """A partition that had missed its deadline sealed, ``late_by`` seconds after it."""

    kind: ClassVar[str] = "sealed_late"
    epoch: int
    partition: str = ""
    deadline_at: float = 0.0
    sealed_at: float = 0.0
    late_by: float = 0.0


@dataclass(frozen=True)
class ProducerRerun(EventRecord):
    """A declared producer ran again for a key already sealed: ``cleared`` when the same task instance
    (``task_instance``) runs a later try (``try_number``) after its try ``succeeded_try`` succeeded
    (``airflow tasks clear``), else another task instance (another DAG run); ``reopened`` when the key
    was rolled back to be sealed and delivered again (``reopen_on_rerun``)."""

    kind: ClassVar[str] = "producer_rerun"
    epoch: int | None = None
    partition: str = ""
    producer: str = ""
    key: str = ""
    task_instance: Mapping[str, Any] = field(default_factory=dict)
    cleared: bool = False
    succeeded_try: int = 0
    try_number: int = 0
    reopened: bool = False


@dataclass(frozen=True)
class UnknownEvent(EventRecord):
    """An event of a kind this version does not know (written by a newer one): its detail as stored."""

    kind: ClassVar[str] = ""
    name: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)


EVENT_KINDS: dict[str, type[EventRecord]] = {cls.kind: cls for cls in (
    PipelineCreated, ConfigSet, Rollback, Compacted, EpochOpened, AttemptStarted, AttemptAborted, PartitionSealed,
    EpochSealed, ConsumerRegistered, ConsumerUnregistered, LeaderChanged, LeaderReleased, BarrierDeclared,
    BarrierReleased, BarrierStragglers, DeliveryScopeRetired, DeadlineMissed, SealedLate, ResealOpened,
    VersionSealed, CorrectionPlanned, CorrectionDone, ProducerRerun)}


def event_record(kind: str, detail: Mapping[str, Any]) -> EventRecord:
    """The record of an event of ``kind`` stored with ``detail``; :class:`CorruptPayload` when a field
    holds a value of the wrong type."""
    cls = EVENT_KINDS.get(kind)
    if cls is None:
        return UnknownEvent(kind, dict(detail))
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = cls.stored_as.get(f.name, f.name)
        if key in detail:
            values[f.name] = _from_json(hints[f.name], detail[key], f"event {kind!r} field {key!r}")
        elif (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING) \
                or (f.default is None and type(None) not in typing.get_args(hints[f.name])):
            # required (an epoch kind's ``epoch`` takes the base's None as its default: not a value)
            raise CorruptPayload(f"event {kind!r} has no {key!r}")
    return cls(**values)


def _to_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _from_json(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        origin = typing.get_origin(hint)
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    if origin is tuple and isinstance(value, list):
        item = typing.get_args(hint)[0]
        return tuple(_from_json(item, v, where) for v in value)
    if origin is Mapping and isinstance(value, dict):
        return dict(value)
    raise CorruptPayload(f"{where}: {value!r} is not a {hint}")
