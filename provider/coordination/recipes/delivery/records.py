"""The records of asset delivery kept in znodes: a scope's cursor, a retired scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads


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
