"""The compaction summary (the ``archive`` znode): what compaction replaced, kept in ZooKeeper.

``through`` is the newest compacted epoch, ``epochs`` how many were compacted in all,
``history_zxid`` where the history of kept epochs starts, ``lineage`` the newest compacted seal's
lineage vector per partition (so a lineage check against a compacted epoch still has it), and
``requests_zxid`` the previous compaction's ``history_zxid``: pipeline-level request ids are forgotten
one compaction behind the epochs, so a request sent while the newest compacted epoch was open is
still found when it is repeated (with an archive's default window the frontier epoch itself is
compacted; written by an older version: absent, nothing is forgotten until the next compaction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.errors import CorruptPayload


@dataclass(frozen=True)
class CompactedLineage:
    """The lineage vector of a partition's newest compacted seal."""

    epoch: int
    upstream: Mapping[str, int]


@dataclass(frozen=True)
class CompactionSummary:
    through: int
    epochs: int
    history_zxid: int | None = None
    lineage: Mapping[str, CompactedLineage] = field(default_factory=dict)
    requests_zxid: int | None = None

    def to_bytes(self) -> bytes:
        return payloads.encode("archive", {
            "through": self.through, "epochs": self.epochs, "history_zxid": self.history_zxid,
            "lineage": {name: {"epoch": item.epoch, "upstream": dict(item.upstream)}
                        for name, item in self.lineage.items()},
            "requests_zxid": self.requests_zxid,
        })

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> CompactionSummary:
        doc = payloads.decode("archive", raw, path=path)
        zxid, lineage, requests = doc.get("history_zxid"), doc.get("lineage", {}), doc.get("requests_zxid")
        if (zxid is not None and not isinstance(zxid, int)) or not isinstance(lineage, Mapping) \
                or (requests is not None and (not isinstance(requests, int) or isinstance(requests, bool))):
            raise CorruptPayload(f"{path}: a compaction summary with history_zxid {zxid!r}, lineage {lineage!r}, "
                                 f"requests_zxid {requests!r}")
        return cls(int(doc["through"]), int(doc["epochs"]), zxid, {
            str(name): _lineage(item, path=path) for name, item in lineage.items()}, requests)


def _lineage(item: Any, *, path: str) -> CompactedLineage:
    if not isinstance(item, Mapping) or not isinstance(item.get("epoch"), int) \
            or not isinstance(item.get("upstream"), Mapping):
        raise CorruptPayload(f"{path}: a compacted lineage entry must be {{epoch, upstream}}, not {item!r}")
    return CompactedLineage(item["epoch"], {str(k): int(v) for k, v in item["upstream"].items()})
