"""The declared producers' staged records: a staged vote (which task instance ran, for which key,
under which request id) and the key an epoch holds.

Written as versioned payloads; records staged before they were versioned (bare JSON objects with
the same fields) still read, so an upgrade finds what an older provider staged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads


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

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> StagedVote:
        doc = _fields("staged_vote", raw, path)
        ti, key, request = doc.get("ti"), doc.get("partition_key"), doc.get("request")
        if not isinstance(ti, Mapping) or not isinstance(key, str) or not isinstance(request, str):
            raise CorruptPayload(f"{path}: a staged vote needs ti, partition_key and request, not {dict(doc)!r}")
        return cls(ti, key, request)


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
