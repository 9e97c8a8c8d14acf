"""The leadership lease's record in its znode, and the holdings it remembers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.wire import payloads


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
