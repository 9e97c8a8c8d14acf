"""The stored result of a consumer registration (under ``requests/<id>``): which consumer, and the
epoch it started at, read back when a repeated registration finds the consumer gone again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload


@dataclass(frozen=True)
class ConsumerRegistration:
    """A registration as its request stored it: ``consumer`` registered, starting at ``acked``."""

    consumer: str
    acked: int

    def to_result(self) -> dict[str, Any]:
        """The request's stored result (``ctx.request_op(..., result)``)."""
        return {"consumer": self.consumer, "acked": self.acked}

    @classmethod
    def from_result(cls, result: Any, *, consumer: str, path: str) -> ConsumerRegistration:
        """The registration of ``consumer`` stored at ``path``; :class:`CorruptPayload` for anything else
        (a result of another shape, or of another consumer: the request id was used for another call)."""
        acked = result.get("acked") if isinstance(result, dict) else None
        if not isinstance(result, dict) or result.get("consumer") != consumer \
                or isinstance(acked, bool) or not isinstance(acked, int) or acked < 0:
            raise CorruptPayload(f"{path}: not a registration of consumer {consumer!r} "
                                 f"({{consumer, acked}}): {result!r:.200}")
        return cls(consumer, acked)
