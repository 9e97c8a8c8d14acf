"""Declared producers: ordinary Airflow tasks, or assets, that produce a partition, and how a partition
key maps to an epoch. Plain data (no Airflow import): stored with the pipeline's configuration.

A producer is either

- a task (:class:`TaskProducer`): ``dag_id.task_id``; it produces its part of a key when it succeeds
  with an outlet asset event carrying that partition key (any of its outlets), or
- an asset (:class:`AssetProducer`): an asset URI and the DAGs allowed to update it; an event on that
  asset with the key, from a task of one of those DAGs, produces its part.

Keys map to epochs through :class:`ExplicitKeys` (a key -> epoch table) or :class:`CalendarKeys` (the
key is a date or an ISO datetime, placed by an :class:`~airflow_epochs.coordination.base.calendar.EpochCalendar`
or :class:`~airflow_epochs.coordination.base.calendar.CronEpochCalendar`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from airflow_epochs.coordination.base.calendar import CronEpochCalendar, EpochCalendar, calendar_from_json
from airflow_epochs.coordination.base.errors import InvalidConfig, InvalidInput, InvalidName
from airflow_epochs.coordination.base.names import validate_epoch, validate_name

if TYPE_CHECKING:
    from airflow_epochs.coordination.wire.config import PipelineConfig

# Airflow's own limits: dag and task ids are at most 250 characters; partition keys too.
_MAX_AIRFLOW_ID = 250
_MAX_KEY_LENGTH = 250
_MAX_EXPLICIT_KEYS = 1000


def _airflow_id(what: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_AIRFLOW_ID or not value.isprintable() \
            or any(ch.isspace() for ch in value):
        raise InvalidConfig(f"{what} must be a non-empty Airflow id without spaces, not {value!r}")
    return value


def _producer_name(value: str, where: str) -> str:
    try:
        return validate_name("producer", value)
    except InvalidName as exc:
        raise InvalidConfig(f"{where}: {exc} (give the producer a shorter name with name=...)") from exc


@dataclass(frozen=True)
class TaskProducer:
    """An Airflow task that produces part of a partition.

    :param dag_id: the producer's DAG.
    :param task_id: the producer task (a task group's tasks as ``group.task``).
    :param name: the producer's name in the ledger (default ``dag_id.task_id``).
    """

    dag_id: str
    task_id: str
    name: str = ""

    def __post_init__(self) -> None:
        _airflow_id("dag_id", self.dag_id)
        _airflow_id("task_id", self.task_id)
        object.__setattr__(self, "name", _producer_name(self.name or f"{self.dag_id}.{self.task_id}",
                                                        f"task {self.dag_id}.{self.task_id}"))

    def matches(self, dag_id: str, task_id: str, asset_uri: str) -> bool:
        """Whether an event on ``asset_uri`` from ``dag_id.task_id`` is this producer's."""
        return dag_id == self.dag_id and task_id == self.task_id

    def to_json(self) -> dict[str, Any]:
        return {"task": {"dag_id": self.dag_id, "task_id": self.task_id}}


@dataclass(frozen=True)
class AssetProducer:
    """An asset that produces part of a partition, updated by the DAGs named (an allow-list).

    :param name: the producer's name in the ledger.
    :param uri: the asset's URI, as the producer tasks declare it in their outlets.
    :param dag_ids: the DAGs whose tasks may update it; an event from any other DAG counts for nothing.
    """

    name: str
    uri: str
    dag_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        _producer_name(self.name, f"asset producer {self.name!r}")
        if not isinstance(self.uri, str) or not self.uri or len(self.uri) > 1500 or not self.uri.isprintable():
            raise InvalidConfig(f"asset producer {self.name!r}: uri must be a printable asset URI, not {self.uri!r}")
        if isinstance(self.dag_ids, str) or not isinstance(self.dag_ids, Iterable):
            raise InvalidConfig(f"asset producer {self.name!r}: dag_ids must be a list of DAG ids, not "
                                f"{self.dag_ids!r}")
        dags = tuple(self.dag_ids)
        if not dags:
            raise InvalidConfig(f"asset producer {self.name!r}: name at least one DAG that updates {self.uri!r}")
        for dag_id in dags:
            _airflow_id(f"asset producer {self.name!r}: dag id", dag_id)
        object.__setattr__(self, "dag_ids", dags)

    def matches(self, dag_id: str, task_id: str, asset_uri: str) -> bool:
        return asset_uri == self.uri and dag_id in self.dag_ids

    def to_json(self) -> dict[str, Any]:
        return {"asset": {"uri": self.uri, "dag_ids": list(self.dag_ids)}}


Producer = TaskProducer | AssetProducer


class _KeyEpochs(Protocol):
    """How a partition key maps to an epoch."""

    def epoch_of(self, key: str) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > _MAX_KEY_LENGTH:
        raise InvalidInput(f"partition key must be a non-empty string of at most {_MAX_KEY_LENGTH} characters, "
                           f"not {key!r}")
    return key


@dataclass(frozen=True)
class ExplicitKeys:
    """A table of partition keys and their epochs (e.g. ``{"2026-01-01": 1, "2026-01-02": 2}``).

    :param epochs: key -> epoch; two keys may not share an epoch.
    """

    epochs: Mapping[str, int]

    def __post_init__(self) -> None:
        if not isinstance(self.epochs, Mapping) or not self.epochs:
            raise InvalidConfig(f"explicit keys must be a non-empty mapping of key -> epoch, not {self.epochs!r}")
        if len(self.epochs) > _MAX_EXPLICIT_KEYS:
            raise InvalidConfig(f"{len(self.epochs)} explicit keys; at most {_MAX_EXPLICIT_KEYS} (use a calendar)")
        seen: dict[int, str] = {}
        for key, epoch in self.epochs.items():
            try:
                _check_key(key)
                validate_epoch(epoch, what=f"epoch of key {key!r}")
            except InvalidInput as exc:
                raise InvalidConfig(str(exc)) from exc
            if epoch in seen:
                raise InvalidConfig(f"keys {seen[epoch]!r} and {key!r} both map to epoch {epoch}")
            seen[epoch] = key
        object.__setattr__(self, "epochs", dict(self.epochs))

    def epoch_of(self, key: str) -> int:
        _check_key(key)
        if key not in self.epochs:
            raise InvalidInput(f"partition key {key!r} is not in the pipeline's key table")
        return self.epochs[key]

    def to_json(self) -> dict[str, Any]:
        return {"explicit": dict(self.epochs)}


@dataclass(frozen=True)
class CalendarKeys:
    """Keys that are dates (``2026-01-31``) or ISO datetimes, placed on an epoch calendar: the key's
    moment (a date or a naive datetime is read in ``timezone``) falls in exactly one epoch.

    :param calendar: an :class:`EpochCalendar` or :class:`CronEpochCalendar`.
    :param timezone: the zone of keys without one (default UTC).
    """

    calendar: EpochCalendar | CronEpochCalendar
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.calendar, (EpochCalendar, CronEpochCalendar)):
            raise InvalidConfig(f"calendar must be an EpochCalendar or CronEpochCalendar, not {self.calendar!r}")
        _zone(self.timezone)

    def epoch_of(self, key: str) -> int:
        _check_key(key)
        try:
            moment = datetime.fromisoformat(key)
        except ValueError:
            try:
                day = date.fromisoformat(key)
            except ValueError:
                raise InvalidInput(f"partition key {key!r} is neither a date nor an ISO datetime") from None
            moment = datetime(day.year, day.month, day.day)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_zone(self.timezone))
        return self.calendar.epoch_for(moment)

    def to_json(self) -> dict[str, Any]:
        return {"calendar": self.calendar.to_json(), "timezone": self.timezone}


def _zone(name: object) -> Any:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name == "UTC":
        return timezone.utc
    if not isinstance(name, str):
        raise InvalidConfig(f"timezone must be an IANA zone name, not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidConfig(f"unknown timezone {name!r}") from None


def _calendar_from_json(data: Mapping[str, Any]) -> EpochCalendar | CronEpochCalendar:
    """Rebuild a calendar from its ``to_json()`` (a configuration's: refused as :class:`InvalidConfig`)."""
    try:
        return calendar_from_json(data)
    except InvalidInput as exc:
        raise InvalidConfig(str(exc)) from None


def _keys_from_json(data: Mapping[str, Any]) -> ExplicitKeys | CalendarKeys:
    if "explicit" in data and isinstance(data["explicit"], Mapping):
        return ExplicitKeys({str(k): v for k, v in data["explicit"].items()})
    if "calendar" in data and isinstance(data["calendar"], Mapping):
        return CalendarKeys(_calendar_from_json(data["calendar"]), str(data.get("timezone", "UTC")))
    raise InvalidConfig(f"declared keys must be {{'explicit': ...}} or {{'calendar': ...}}, not {dict(data)!r}")


def _producer_from_json(name: str, data: Mapping[str, Any]) -> Producer:
    if isinstance(data.get("task"), Mapping):
        task = data["task"]
        return TaskProducer(str(task.get("dag_id")), str(task.get("task_id")), name=name)
    if isinstance(data.get("asset"), Mapping):
        asset = data["asset"]
        dag_ids = asset.get("dag_ids")
        return AssetProducer(name, str(asset.get("uri")), tuple(dag_ids) if isinstance(dag_ids, list) else ())
    raise InvalidConfig(f"declared producer {name!r} must be {{'task': ...}} or {{'asset': ...}}, not {dict(data)!r}")


@dataclass(frozen=True)
class Match:
    """A declared producer that a task's outlet event stands for."""

    partition: str
    producer: str
    key: str


@dataclass(frozen=True)
class DeclaredProducers:
    """Per partition, the Airflow tasks or assets that produce it, and the key -> epoch map.

    :param partitions: partition name -> its declared producers.
    :param keys: how a partition key maps to an epoch (:class:`ExplicitKeys` or :class:`CalendarKeys`).
    """

    partitions: Mapping[str, tuple[Producer, ...]]
    keys: ExplicitKeys | CalendarKeys

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, Mapping) or not self.partitions:
            raise InvalidConfig(f"declared producers need at least one partition, not {self.partitions!r}")
        normalised: dict[str, tuple[Producer, ...]] = {}
        for partition, producers in self.partitions.items():
            try:
                validate_name("partition", partition)
            except InvalidName as exc:
                raise InvalidConfig(str(exc)) from exc
            if isinstance(producers, (str, TaskProducer, AssetProducer)) or not isinstance(producers, Iterable):
                raise InvalidConfig(f"producers of partition {partition!r} must be a list, not {producers!r}")
            plist = tuple(producers)
            if not plist:
                raise InvalidConfig(f"partition {partition!r} declares no producers")
            names = [p.name for p in plist if isinstance(p, (TaskProducer, AssetProducer))]
            if len(names) != len(plist):
                raise InvalidConfig(f"producers of partition {partition!r} must be TaskProducer or AssetProducer")
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise InvalidConfig(f"partition {partition!r} declares producer name(s) {twice} more than once")
            normalised[partition] = plist
        object.__setattr__(self, "partitions", normalised)
        if not isinstance(self.keys, (ExplicitKeys, CalendarKeys)):
            raise InvalidConfig(f"keys must be ExplicitKeys or CalendarKeys, not {self.keys!r}")

    def pipeline_config(self, **settings: Any) -> PipelineConfig:
        """The :class:`PipelineConfig` with these partitions and producers (``settings``: its other fields)."""
        from airflow_epochs.coordination.wire.config import PipelineConfig

        return PipelineConfig(partitions=self.producer_names(), declared=self, **settings)

    def producer_names(self) -> dict[str, tuple[str, ...]]:
        """partition -> producer names: the ``partitions`` of the :class:`PipelineConfig` that holds this."""
        return {partition: tuple(p.name for p in plist) for partition, plist in self.partitions.items()}

    def matches(self, dag_id: str, task_id: str, events: Iterable[tuple[str, str]]) -> list[Match]:
        """The declared producers that a task's outlet events stand for.

        :param events: ``(asset URI, partition key)`` of each outlet event of the task.
        """
        found: dict[tuple[str, str, str], Match] = {}
        for uri, key in events:
            for partition, plist in self.partitions.items():
                for producer in plist:
                    if producer.matches(dag_id, task_id, uri):
                        found.setdefault((partition, producer.name, key), Match(partition, producer.name, key))
        return list(found.values())

    def names_dags(self) -> set[str]:
        """Every DAG id a declared producer can come from (a cheap first filter)."""
        dags: set[str] = set()
        for plist in self.partitions.values():
            for producer in plist:
                dags.update((producer.dag_id,) if isinstance(producer, TaskProducer) else producer.dag_ids)
        return dags

    def to_json(self) -> dict[str, Any]:
        return {"producers": {partition: {p.name: p.to_json() for p in plist}
                              for partition, plist in self.partitions.items()},
                "keys": self.keys.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeclaredProducers:
        producers = data.get("producers")
        keys = data.get("keys")
        if not isinstance(producers, Mapping) or not isinstance(keys, Mapping):
            raise InvalidConfig(f"declared producers need 'producers' and 'keys' mappings, not {dict(data)!r}")
        partitions: dict[str, tuple[Producer, ...]] = {}
        for partition, named in producers.items():
            if not isinstance(named, Mapping):
                raise InvalidConfig(f"declared producers of {partition!r} must be a mapping, not {named!r}")
            partitions[str(partition)] = tuple(_producer_from_json(str(name), spec if isinstance(spec, Mapping) else {})
                                               for name, spec in named.items())
        return cls(partitions, _keys_from_json(keys))

