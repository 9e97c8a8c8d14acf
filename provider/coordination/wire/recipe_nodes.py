"""The records the recipes keep in znodes (leadership leases, barriers, asset delivery), one frozen type
per payload kind, each with its encoding, as :mod:`.nodes` does for the protocol's records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads

# -- leadership -------------------------------------------------------------------------------


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


# -- barriers ---------------------------------------------------------------------------------


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


# -- asset delivery ---------------------------------------------------------------------------


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
