"""The records the core keeps in znodes, one frozen type per payload kind, each with its encoding.

This module is the one place that turns a payload's JSON object into a typed record and back
(through :mod:`.payloads`, which checks the envelope: schema version, kind, required fields and
size). Everywhere else a record is read by attribute. The wire format is the one written so far,
so znodes written before these types existed decode unchanged. Votes and seals are decoded where
they are written (:mod:`.votes`, :mod:`.seals`, :mod:`.reader`); the recipes' records are in
each recipe family's records module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidConfig
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.config import ConfigVersion, PipelineConfig


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


# -- the pipeline and its configuration ------------------------------------------------------


@dataclass(frozen=True)
class PipelineRecord:
    """The pipeline record (``<root>/<pipeline>``) and the znode version it was read at."""

    first_epoch: int
    newest_epoch: int
    configs: tuple[tuple[int, int], ...]  # (version, from_epoch), in version order
    compacted_through: int
    created_at: float
    request: str
    version: int = -1

    def body(self, **changes: Any) -> dict[str, Any]:
        """The record's fields (for re-encoding), with ``changes`` applied."""
        doc: dict[str, Any] = {
            "first_epoch": self.first_epoch, "newest_epoch": self.newest_epoch,
            "configs": [list(item) for item in self.configs], "compacted_through": self.compacted_through,
            "created_at": self.created_at, "request": self.request,
        }
        doc.update(changes)
        return doc

    def to_bytes(self, **changes: Any) -> bytes:
        """The record's payload, with ``changes`` applied."""
        return payloads.encode("pipeline", self.body(**changes))

    @classmethod
    def from_bytes(cls, raw: bytes, version: int, *, path: str) -> PipelineRecord:
        doc = payloads.decode("pipeline", raw, path=path)
        try:
            configs = tuple((int(v), int(f)) for v, f in doc["configs"])
        except (TypeError, ValueError) as exc:
            raise CorruptPayload(f"{path}: malformed configuration index {doc['configs']!r}") from exc
        return cls(
            first_epoch=int(doc["first_epoch"]), newest_epoch=int(doc["newest_epoch"]), configs=configs,
            compacted_through=int(doc["compacted_through"]), created_at=float(doc["created_at"]),
            request=str(doc.get("request", "")), version=version,
        )

    def version_for(self, epoch: int) -> int | None:
        """The configuration version in force at ``epoch``: the newest one starting at or before it."""
        best: tuple[int, int] | None = None
        for version, from_epoch in self.configs:
            if from_epoch <= epoch and (best is None or (from_epoch, version) > (best[1], best[0])):
                best = (version, from_epoch)
        return None if best is None else best[0]


# The retention window of configuration versions written before ``retain_epochs`` was always stored.
LEGACY_RETAIN_EPOCHS = 1000


def decode_config(raw: bytes, version: int, *, path: str) -> ConfigVersion:
    """Configuration ``version`` as stored at ``path``."""
    doc = payloads.decode("config", raw, path=path)
    # A version stored without ``retain_epochs`` was written when leaving it out meant the default of
    # that time: it keeps that window, not today's smaller default.
    stored = {"retain_epochs": LEGACY_RETAIN_EPOCHS, **{k: v for k, v in doc.items() if k != "request"}}
    try:
        config = PipelineConfig.from_json(stored)
    except InvalidConfig as exc:
        raise CorruptPayload(f"{path}: {exc}") from exc
    return ConfigVersion(version, int(doc["from_epoch"]), config)


def config_request(raw: bytes, *, path: str) -> str:
    """The id of the request that scheduled the configuration version stored at ``path`` ('' if none)."""
    return str(payloads.decode("config", raw, path=path).get("request") or "")


def encode_config(config: PipelineConfig, from_epoch: int, request: str = "") -> bytes:
    """A configuration version's payload; ``request`` is the id of the request that scheduled it (kept
    for good: versions are never deleted, so that request can always be found)."""
    return payloads.encode("config", {"from_epoch": from_epoch, **config.to_json(),
                                      "retain_epochs": config.retain_epochs, "request": request})


# -- epochs and attempts ---------------------------------------------------------------------


@dataclass(frozen=True)
class EpochNode:
    """An epoch record: its state, current attempt (token and owner), configuration and opening."""

    state: str  # "open" | "sealed" | "rolled_back"
    attempt: int
    owner: str
    config_version: int
    generation: int
    opened_at: float
    sealed_at: float | None = None

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"state": self.state, "attempt": self.attempt, "owner": self.owner,
                                "config_version": self.config_version, "generation": self.generation,
                                "opened_at": self.opened_at}
        if self.sealed_at is not None:
            body["sealed_at"] = self.sealed_at
        return payloads.encode("epoch", body)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> EpochNode:
        doc = payloads.decode("epoch", raw, path=path)
        return cls(str(doc["state"]), int(doc["attempt"]), str(doc["owner"]), int(doc["config_version"]),
                   int(doc["generation"]), float(doc["opened_at"]), _optional_float(doc.get("sealed_at")))


@dataclass(frozen=True)
class AttemptNode:
    """An attempt node: its fencing token, owner, state, and the requests that changed it."""

    token: int
    owner: str
    started_at: float
    request: str  # the request that opened it
    state: str  # "running" | "superseded" | "aborted" | "rolled_back"
    generation: int | None = None
    config_version: int | None = None
    superseded_by: int | None = None
    reason: str | None = None
    changed_by: str | None = None  # the request of the last change
    aborted_by: str | None = None
    sealed_by_request: str | None = None

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"token": self.token, "owner": self.owner, "started_at": self.started_at,
                                "request": self.request, "state": self.state}
        for name in ("generation", "config_version", "superseded_by", "reason", "changed_by", "aborted_by",
                     "sealed_by_request"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return payloads.encode("attempt", body)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> AttemptNode:
        doc = payloads.decode("attempt", raw, path=path)

        def optional_int(name: str) -> int | None:
            value = doc.get(name)
            return None if value is None else int(value)

        def optional_str(name: str) -> str | None:
            value = doc.get(name)
            return None if value is None else str(value)

        return cls(int(doc["token"]), str(doc["owner"]), float(doc["started_at"]), str(doc["request"]),
                   str(doc["state"]), optional_int("generation"), optional_int("config_version"),
                   optional_int("superseded_by"), optional_str("reason"), optional_str("changed_by"),
                   optional_str("aborted_by"), optional_str("sealed_by_request"))


@dataclass(frozen=True)
class FrontierNode:
    """The frontier: the highest epoch such that it and every earlier epoch are sealed."""

    epoch: int

    def to_bytes(self) -> bytes:
        return payloads.encode("frontier", {"epoch": self.epoch})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> FrontierNode:
        return cls(int(payloads.decode("frontier", raw, path=path)["epoch"]))


@dataclass(frozen=True)
class SnapshotPlace:
    """Where a sealed snapshot is: the epoch, its opening and the attempt that sealed it."""

    epoch: int
    generation: int
    attempt: int

    def to_json(self) -> dict[str, int]:
        return {"epoch": self.epoch, "generation": self.generation, "attempt": self.attempt}

    @classmethod
    def from_json(cls, value: Any, *, path: str) -> SnapshotPlace | None:
        if not value:
            return None
        if not isinstance(value, Mapping):
            raise CorruptPayload(f"{path}: a snapshot place must be an object, not {value!r}")
        try:
            return cls(int(value["epoch"]), int(value["generation"]), int(value.get("attempt", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptPayload(f"{path}: malformed snapshot place {value!r}") from exc


@dataclass(frozen=True)
class SnapshotPointerNode:
    """A partition's two newest seals that left snapshots (so a retry never walks back)."""

    partition: str
    current: SnapshotPlace
    previous: SnapshotPlace | None = None

    def to_bytes(self) -> bytes:
        return payloads.encode("snapshot_pointer", {
            "partition": self.partition, "current": self.current.to_json(),
            "previous": None if self.previous is None else self.previous.to_json()})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> SnapshotPointerNode:
        doc = payloads.decode("snapshot_pointer", raw, path=path)
        current = SnapshotPlace.from_json(doc["current"], path=path)
        if current is None:
            raise CorruptPayload(f"{path}: the snapshot pointer has no current place")
        return cls(str(doc["partition"]), current, SnapshotPlace.from_json(doc.get("previous"), path=path))


# -- consumers, requests and the history -----------------------------------------------------


@dataclass(frozen=True)
class ConsumerNode:
    """A registered consumer: the epoch it acknowledged, and the request that registered it."""

    acked: int
    registered_at: float
    request: str | None = None

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"acked": self.acked, "registered_at": self.registered_at}
        if self.request is not None:
            body["request"] = self.request
        return payloads.encode("consumer", body)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ConsumerNode:
        doc = payloads.decode("consumer", raw, path=path)
        request = doc.get("request")
        return cls(int(doc["acked"]), float(doc["registered_at"]), None if request is None else str(request))


@dataclass(frozen=True)
class RequestNode:
    """A pipeline-level request's stored outcome (``requests/<id>``): which call, when, and its result."""

    call: str
    at: float
    result: Any = None

    def to_bytes(self) -> bytes:
        return payloads.encode("request", {"call": self.call, "at": self.at, "result": self.result})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> RequestNode:
        doc = payloads.decode("request", raw, path=path)
        return cls(str(doc["call"]), float(doc["at"]), doc.get("result"))


@dataclass(frozen=True)
class EventNode:
    """One history event as stored (its sequence number and zxid come from the znode)."""

    event: str
    at: float
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return payloads.encode("event", {"event": self.event, "at": self.at, "detail": dict(self.detail)})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> EventNode:
        doc = payloads.decode("event", raw, path=path)
        return cls(str(doc["event"]), float(doc["at"]), doc["detail"])


@dataclass(frozen=True)
class EpochSealNode:
    """The epoch's seal (written once, by the attempt that sealed it); read here for its request id."""

    attempt: int
    generation: int
    sealed_at: float
    request: str

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> EpochSealNode:
        doc = payloads.decode("epoch_seal", raw, path=path)
        return cls(int(doc["attempt"]), int(doc["generation"]), float(doc["sealed_at"]), str(doc["request"]))
