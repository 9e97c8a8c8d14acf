"""The records the core keeps in znodes, one frozen type per payload kind, each with its encoding.

This module is the one place that turns a payload's JSON object into a typed record and back
(through :mod:`.payloads`, which checks the envelope: schema version, kind, required fields and
size). Everywhere else a record is read by attribute. The wire format is the one written so far,
so znodes written before these types existed decode unchanged. Votes and seals are decoded where
they are written (:mod:`.votes`, :mod:`.seals`, :mod:`.reader`).
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


# -- leadership ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holding:
    """One earlier holding of a lease: who held it, under which request, and whether it was released."""

    owner: str
    request: str
    released: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"owner": self.owner, "request": self.request, "released": self.released}


@dataclass(frozen=True)
class LeaseNode:
    """A leadership lease: the holder, until when, since when, its request, and recent holdings."""

    owner: str
    until: float
    since: float
    request: str
    released: bool = False
    recent: tuple[Holding, ...] = ()  # newest first

    def holding(self) -> Holding:
        return Holding(self.owner, self.request, self.released)

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"owner": self.owner, "until": self.until, "since": self.since,
                                "request": self.request}
        if self.released:
            body["released"] = True
        if self.recent:
            body["recent"] = [held.to_json() for held in self.recent]
        return payloads.encode("lease", body)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> LeaseNode:
        doc = payloads.decode("lease", raw, path=path)
        recent = doc.get("recent")
        if not isinstance(recent, list):  # a record of an older version keeps one earlier holding
            previous = doc.get("previous")
            recent = [previous] if isinstance(previous, dict) else []
        holdings = tuple(Holding(str(held.get("owner")), str(held.get("request")), bool(held.get("released")))
                         for held in recent if isinstance(held, dict))
        return cls(str(doc["owner"]), float(doc["until"]), float(doc["since"]), str(doc["request"]),
                   bool(doc.get("released")), holdings)


# -- barriers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BarrierNode:
    """A barrier record: its straggler policy, deadline, registered count, and whether it is decided."""

    policy: str
    timeout: float
    k: int | None
    declared_at: float
    deadline: float
    registered: int
    closed: bool = False

    def to_bytes(self) -> bytes:
        return payloads.encode("barrier", {
            "policy": self.policy, "timeout": self.timeout, "k": self.k, "declared_at": self.declared_at,
            "deadline": self.deadline, "registered": self.registered, "closed": self.closed})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> BarrierNode:
        doc = payloads.decode("barrier", raw, path=path)
        k = doc.get("k")
        return cls(str(doc["policy"]), float(doc["timeout"]), None if k is None else int(k),
                   float(doc.get("declared_at", 0.0)), float(doc["deadline"]), int(doc["registered"]),
                   bool(doc.get("closed")))


@dataclass(frozen=True)
class ArrivalNode:
    """One participant's arrival at a barrier: when, and under which request."""

    at: float
    request: str

    def to_bytes(self) -> bytes:
        return payloads.encode("arrival", {"at": self.at, "request": self.request})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ArrivalNode:
        doc = payloads.decode("arrival", raw, path=path)
        return cls(float(doc["at"]), str(doc["request"]))


@dataclass(frozen=True)
class ReleaseNode:
    """How a barrier was decided (release, failure, or a stragglers' report).

    ``late`` names at most the first few stragglers (sorted); ``late_count`` counts all of them, so a
    barrier of thousands of participants keeps its record far below the payload limit. A record
    written before the count existed has every straggler in ``late``: its count is their number.
    """

    decision: str  # "all" | "quorum" | "failed" | "rerun"
    arrived: int
    late: tuple[str, ...]
    at: float
    late_count: int | None = None  # None: every straggler is named

    @property
    def stragglers(self) -> int:
        return len(self.late) if self.late_count is None else self.late_count

    def to_bytes(self) -> bytes:
        return payloads.encode("release", {"decision": self.decision, "arrived": self.arrived,
                                           "late": list(self.late), "at": self.at,
                                           "late_count": self.stragglers,
                                           "late_truncated": self.stragglers > len(self.late)})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ReleaseNode:
        doc = payloads.decode("release", raw, path=path)
        late = tuple(str(name) for name in doc["late"])
        count = doc.get("late_count", len(late))  # absent in records written before the bound
        if isinstance(count, bool) or not isinstance(count, int) or count < len(late):
            raise CorruptPayload(f"{path}: release payload field 'late_count' is {count!r}, expected an integer "
                                 f"of at least {len(late)} (the stragglers it names)")
        return cls(str(doc["decision"]), int(doc["arrived"]), late, float(doc["at"]), count)


# -- asset delivery --------------------------------------------------------------------------


@dataclass(frozen=True)
class RetiredScope:
    """A retired delivery scope and where its cursors stood (partition -> the next epoch it would have
    delivered); also the stored result of the retirement's request."""

    scope: str
    cursors: dict[str, int]

    def to_result(self) -> dict[str, Any]:
        """The request's stored result (``ctx.request_op(..., result)``)."""
        return {"scope": self.scope, "cursors": dict(self.cursors)}

    @classmethod
    def from_result(cls, result: Any, *, scope: str, path: str) -> RetiredScope:
        """The retirement of ``scope`` stored at ``path``; :class:`CorruptPayload` for anything else (a result
        of another shape or scope: the request id was used for another call)."""
        cursors = result.get("cursors") if isinstance(result, dict) else None
        if not isinstance(result, dict) or result.get("scope") != scope or not isinstance(cursors, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in cursors.items()):
            raise CorruptPayload(f"{path}: not a retirement of delivery scope {scope!r} ({{scope, cursors}}): "
                                 f"{result!r:.200}")
        return cls(scope, dict(cursors))


@dataclass(frozen=True)
class DeliveryCursor:
    """How far a delivery scope has handed a partition's seals to Airflow: the next epoch to deliver."""

    following: int

    def to_bytes(self) -> bytes:
        return payloads.encode("asset_cursor", {"following": self.following})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> DeliveryCursor:
        text = raw.strip()
        if text.isdigit():  # written before the cursor was a versioned payload: the bare number
            return cls(int(text))
        return cls(int(payloads.decode("asset_cursor", raw, path=path)["following"]))
