"""The declared producers' staged records: a staged vote (which task instance ran, for which key,
under which request id) and the key an epoch holds.

Written as versioned payloads; records staged before they were versioned (bare JSON objects with
the same fields) still read, so an upgrade finds what an older provider staged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.declared import DeclaredProducers, Match

# A host's filter holds every configured pipeline's declaration (each at most 48 KB as JSON).
_MAX_FILTER_BYTES = 4 * 1024 * 1024


def _fields(kind: str, raw: bytes, path: str) -> Mapping[str, Any]:
    """The record's fields, from a versioned payload or from the bare object of older versions."""
    try:
        doc = payloads.loads_bounded(raw)
    except ValueError as exc:
        raise CorruptPayload(f"{path}: not a staged record ({exc})") from None
    if not isinstance(doc, dict):
        raise CorruptPayload(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return payloads.decode(kind, raw, path=path) if "schema" in doc else doc


@dataclass(frozen=True)
class StagedVote:
    """A declared producer's vote, staged create-only before it is cast in epoch order."""

    task_instance: Mapping[str, Any]
    partition_key: str
    request: str

    def to_json(self) -> dict[str, Any]:
        return {"ti": dict(self.task_instance), "partition_key": self.partition_key, "request": self.request}

    def to_bytes(self) -> bytes:
        return payloads.encode("staged_vote", self.to_json())

    def vote(self) -> dict[str, Any]:
        """The vote cast for it: the task instance and the partition key (what :meth:`voted_by` reads)."""
        return {"task_instance": dict(self.task_instance), "partition_key": self.partition_key}

    @staticmethod
    def voted_by(vote: Any) -> Mapping[str, Any] | None:
        """The task instance a vote cast by :meth:`vote` names (None: the vote is not a staged one)."""
        found = vote.get("task_instance") if isinstance(vote, Mapping) else None
        return found if isinstance(found, Mapping) else None

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> StagedVote:
        doc = _fields("staged_vote", raw, path)
        ti, key, request = doc.get("ti"), doc.get("partition_key"), doc.get("request")
        if not isinstance(ti, Mapping) or not isinstance(key, str) or not isinstance(request, str):
            raise CorruptPayload(f"{path}: a staged vote needs ti, partition_key and request, not {dict(doc)!r}")
        return cls(ti, key, request)


@dataclass(frozen=True)
class SucceededMark:
    """The highest try of a task instance that reported success after staging its vote: a later try of
    the same task instance is a cleared re-run (``airflow tasks clear``), not a retry (a try killed
    before its success leaves no mark)."""

    task_instance: Mapping[str, Any]
    try_number: int

    def to_bytes(self) -> bytes:
        return payloads.encode("declared_succeeded", {"ti": dict(self.task_instance), "try": self.try_number})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> SucceededMark:
        doc = payloads.decode("declared_succeeded", raw, path=path)
        ti, tried = doc["ti"], doc["try"]
        if not isinstance(ti, Mapping) or type(tried) is not int or tried < 0:
            raise CorruptPayload(f"{path}: a success mark needs ti and a try number >= 0, not {doc!r}"[:300])
        return cls(ti, tried)


@dataclass(frozen=True)
class StagedKey:
    """The partition key an epoch of a declared pipeline holds."""

    partition_key: str

    def to_bytes(self) -> bytes:
        return payloads.encode("staged_key", {"partition_key": self.partition_key})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> StagedKey:
        key = _fields("staged_key", raw, path).get("partition_key")
        if not isinstance(key, str):
            raise CorruptPayload(f"{path}: a staged epoch needs its partition_key, not {key!r}")
        return cls(key)


@dataclass(frozen=True)
class StagedPruned:
    """Data of the ``declared`` folder: every staged epoch up to ``through`` has been pruned (a cursor,
    so pruning never lists the folder, whose children grow with the epochs staged)."""

    through: int

    def to_bytes(self) -> bytes:
        return payloads.encode("staged_pruned", {"through": self.through})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> StagedPruned | None:
        """The cursor, or None for a folder written before there was one (empty data)."""
        if not raw:
            return None
        through = payloads.decode("staged_pruned", raw, path=path).get("through")
        if not isinstance(through, int):
            raise CorruptPayload(f"{path}: a staged-pruning cursor needs an integer 'through', not {through!r}")
        return cls(through)


Mark = tuple[int, int]


@dataclass(frozen=True)
class ProducerFilter:
    """The declarations of the deployment's pipelines (None: the pipeline declares none or is absent).

    :param source: what the filter was read for (connection id, root, pipelines): a file written for
        other settings is not used.
    :param declarations: pipeline -> its declared producers, or None.
    :param fetched_at: when the declarations were read from ZooKeeper (seconds since the epoch).
    :param marks: pipeline -> the mark of its declaration read *before* the declarations were
        (``declaration_mark``: creation zxid and child version of its configuration folder; None:
        absent). The filter is current while ZooKeeper shows the same marks.
    """

    source: tuple[str, str, tuple[str, ...]]
    declarations: Mapping[str, DeclaredProducers | None]
    fetched_at: float
    marks: Mapping[str, Mark | None] = field(default_factory=dict)

    def matches(self, dag_id: str, task_id: str, events: Iterable[tuple[str, str]]) -> dict[str, list[Match]]:
        """pipeline -> the declared producers the task's outlet events stand for (only non-empty ones)."""
        listed = list(events)
        found: dict[str, list[Match]] = {}
        for pipeline, declared in self.declarations.items():
            if declared is not None and dag_id in declared.names_dags():
                matched = declared.matches(dag_id, task_id, listed)
                if matched:
                    found[pipeline] = matched
        return found

    def current(self, marks: Mapping[str, Mark | None]) -> bool:
        """Whether the declarations are still those read: ZooKeeper now shows ``marks``, the same as
        those read with them, for every pipeline (a filter without marks is never current)."""
        return set(marks) == set(self.source[2]) and all(
            pipeline in self.marks and self.marks[pipeline] == mark for pipeline, mark in marks.items())

    def to_bytes(self) -> bytes:
        conn, root, pipelines = self.source
        return payloads.encode("declared_filter", {
            "conn": conn, "root": root, "pipelines": list(pipelines), "fetched_at": self.fetched_at,
            "declarations": {p: None if d is None else d.to_json() for p, d in self.declarations.items()},
            "marks": {p: None if m is None else list(m) for p, m in self.marks.items()}},
            limit=_MAX_FILTER_BYTES)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ProducerFilter:
        doc = payloads.decode("declared_filter", raw, path=path)
        pipelines, declarations = doc["pipelines"], doc["declarations"]
        if not isinstance(pipelines, list) or not all(isinstance(p, str) for p in pipelines) \
                or not isinstance(declarations, dict) or set(declarations) != set(pipelines):
            raise CorruptPayload(f"{path}: a filter needs one declaration (or null) per pipeline, not {doc!r}"[:400])
        found: dict[str, DeclaredProducers | None] = {}
        for pipeline, declared in declarations.items():
            if declared is not None and not isinstance(declared, dict):
                raise CorruptPayload(f"{path}: the declaration of {pipeline!r} is not an object")
            found[pipeline] = None if declared is None else DeclaredProducers.from_json(declared)
        fetched = doc["fetched_at"]
        assert isinstance(fetched, (int, float))  # the payload's schema checked it
        return cls((str(doc["conn"]), str(doc["root"]), tuple(pipelines)), found, float(fetched),
                   _marks(doc.get("marks", {}), path))


def _marks(raw: Any, path: str) -> dict[str, Mark | None]:
    """The marks of a filter file (a file written before marks existed has none: never current)."""
    if not isinstance(raw, dict):
        raise CorruptPayload(f"{path}: a filter's marks are an object, not {raw!r}"[:200])
    marks: dict[str, Mark | None] = {}
    for pipeline, mark in raw.items():
        if mark is None:
            marks[pipeline] = None
        elif isinstance(mark, list) and len(mark) == 2 and all(type(n) is int and n >= 0 for n in mark):
            marks[pipeline] = (mark[0], mark[1])
        else:
            raise CorruptPayload(f"{path}: the mark of {pipeline!r} is not [zxid, version]: {mark!r}"[:200])
    return marks
