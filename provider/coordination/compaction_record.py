"""The compaction summary (the ``archive`` znode): what compaction replaced, kept in ZooKeeper.

``through`` is the newest compacted epoch, ``epochs`` how many were compacted in all,
``history_zxid`` where the history of kept epochs starts, ``lineage`` the newest compacted seal's
lineage vector per partition (so a lineage check against a compacted epoch still has it), and
``requests_zxid`` the previous compaction's ``history_zxid``: pipeline-level request ids are forgotten
one compaction behind the epochs, so a request sent while the newest compacted epoch was open is
still found when it is repeated (with an archive's default window the frontier epoch itself is
compacted; written by an older version: absent, nothing is forgotten until the next compaction).

``partitions_through``: partitions removed from the configuration of every epoch up to it have left
ZooKeeper for the archive (their snapshot pointers and lineage entries, :mod:`.retired_partitions`);
``retiring``: the epoch a retirement under way is named by, so a retry after a crash writes the same
files (absent in summaries of older versions: 0 and None).
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
    partitions_through: int = 0
    retiring: int | None = None

    def to_bytes(self) -> bytes:
        return payloads.encode("archive", {
            "through": self.through, "epochs": self.epochs, "history_zxid": self.history_zxid,
            "lineage": {name: {"epoch": item.epoch, "upstream": dict(item.upstream)}
                        for name, item in self.lineage.items()},
            "requests_zxid": self.requests_zxid,
            "partitions_through": self.partitions_through, "retiring": self.retiring,
        })

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> CompactionSummary:
        doc = payloads.decode("archive", raw, path=path)
        zxid, lineage, requests = doc.get("history_zxid"), doc.get("lineage", {}), doc.get("requests_zxid")
        retired, retiring = doc.get("partitions_through", 0), doc.get("retiring")
        if (zxid is not None and not isinstance(zxid, int)) or not isinstance(lineage, Mapping) \
                or not _optional_int(requests) or not _optional_int(retired) or not _optional_int(retiring):
            raise CorruptPayload(f"{path}: a compaction summary with history_zxid {zxid!r}, lineage {lineage!r}, "
                                 f"requests_zxid {requests!r}, partitions_through {retired!r}, retiring {retiring!r}")
        return cls(int(doc["through"]), int(doc["epochs"]), zxid, {
            str(name): _lineage(item, path=path) for name, item in lineage.items()}, requests, int(retired or 0),
            retiring)


def _optional_int(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _lineage(item: Any, *, path: str) -> CompactedLineage:
    if not isinstance(item, Mapping) or not isinstance(item.get("epoch"), int) \
            or not isinstance(item.get("upstream"), Mapping):
        raise CorruptPayload(f"{path}: a compacted lineage entry must be {{epoch, upstream}}, not {item!r}")
    return CompactedLineage(item["epoch"], {str(k): int(v) for k, v in item["upstream"].items()})
