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

``snapshots``: per partition, the newest compacted seal that left a snapshot, as ``[epoch, generation,
attempt]`` (so a rollback to the compaction point still names it; without an archive compaction
keeps that epoch in full);
``snapshots_from``: seals compacted after this epoch are all recorded there (a summary written before
the field existed: its ``through``, as nothing older is known).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.nodes import SnapshotPlace, SnapshotPointerNode

# The format of a retired partition's archive file.
RETIRED_FORMAT = 1


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
    snapshots: Mapping[str, SnapshotPlace] = field(default_factory=dict)
    snapshots_from: int = 0

    def to_bytes(self) -> bytes:
        return payloads.encode("archive", {
            "through": self.through, "epochs": self.epochs, "history_zxid": self.history_zxid,
            "lineage": {name: {"epoch": item.epoch, "upstream": dict(item.upstream)}
                        for name, item in self.lineage.items()},
            "requests_zxid": self.requests_zxid,
            "partitions_through": self.partitions_through, "retiring": self.retiring,
            "snapshots": {name: [place.epoch, place.generation, place.attempt]
                          for name, place in self.snapshots.items()},
            "snapshots_from": self.snapshots_from,
        })

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> CompactionSummary:
        doc = payloads.decode("archive", raw, path=path)
        zxid, lineage, requests = doc.get("history_zxid"), doc.get("lineage", {}), doc.get("requests_zxid")
        retired, retiring = doc.get("partitions_through", 0), doc.get("retiring")
        snapshots, since = doc.get("snapshots", {}), doc.get("snapshots_from", doc["through"])
        if (zxid is not None and not isinstance(zxid, int)) or not isinstance(lineage, Mapping) \
                or not _optional_int(requests) or not _optional_int(retired) or not _optional_int(retiring) \
                or not isinstance(snapshots, Mapping) or not _optional_int(since) or since is None:
            raise CorruptPayload(f"{path}: a compaction summary with history_zxid {zxid!r}, lineage {lineage!r}, "
                                 f"requests_zxid {requests!r}, partitions_through {retired!r}, retiring {retiring!r}, "
                                 f"snapshots {snapshots!r}, snapshots_from {since!r}")
        return cls(int(doc["through"]), int(doc["epochs"]), zxid, {
            str(name): _lineage(item, path=path) for name, item in lineage.items()}, requests, int(retired or 0),
            retiring, {str(name): _place(item, path=path) for name, item in snapshots.items()}, int(since))


def _optional_int(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _place(item: Any, *, path: str) -> SnapshotPlace:
    """A snapshot place kept in the summary as ``[epoch, generation, attempt]`` (one per partition: short)."""
    if not isinstance(item, list) or len(item) != 3 or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in item):
        raise CorruptPayload(f"{path}: a compacted snapshot place must be [epoch, generation, attempt], not {item!r}")
    return SnapshotPlace(item[0], item[1], item[2])


def _lineage(item: Any, *, path: str) -> CompactedLineage:
    if not isinstance(item, Mapping) or not isinstance(item.get("epoch"), int) \
            or not isinstance(item.get("upstream"), Mapping):
        raise CorruptPayload(f"{path}: a compacted lineage entry must be {{epoch, upstream}}, not {item!r}")
    return CompactedLineage(item["epoch"], {str(k): int(v) for k, v in item["upstream"].items()})


@dataclass(frozen=True)
class RetiredPartition:
    """What ZooKeeper held of a removed partition when it left for the archive (:mod:`.retired_partitions`):
    its snapshot pointer and its entry of the summary's ``lineage``. Stored as two canonical JSON lines,
    the record and ``{"kind": "end", "sha256"}`` (the first line's digest: a cut-short file is refused)."""

    partition: str
    retired_through: int
    pointer: SnapshotPointerNode | None
    lineage: CompactedLineage | None

    def to_bytes(self, pipeline: str) -> bytes:
        """The canonical bytes (the same record always gives the same bytes)."""
        pointer = None if self.pointer is None else {
            "current": self.pointer.current.to_json(),
            "previous": None if self.pointer.previous is None else self.pointer.previous.to_json()}
        lineage = None if self.lineage is None else {
            "epoch": self.lineage.epoch, "upstream": dict(self.lineage.upstream)}
        body = _line({"kind": "retired_partition", "format": RETIRED_FORMAT, "pipeline": pipeline,
                      "partition": self.partition, "retired_through": self.retired_through,
                      "pointer": pointer, "lineage": lineage})
        return body + _line({"kind": "end", "sha256": hashlib.sha256(body).hexdigest()})

    @classmethod
    def from_bytes(cls, raw: bytes, *, where: str) -> RetiredPartition:
        """Parse a retirement file; :class:`CorruptPayload` if it is cut short or altered."""
        body, _, last = raw.rstrip(b"\n").rpartition(b"\n")
        try:
            end = json.loads(last)
            if end.get("kind") != "end" or end.get("sha256") != hashlib.sha256(body + b"\n").hexdigest():
                raise CorruptPayload(f"{where}: the retired partition record is incomplete or altered "
                                     "(digest mismatch)")
            doc = json.loads(body)
            if doc.get("kind") != "retired_partition" or doc.get("format") != RETIRED_FORMAT:
                raise CorruptPayload(f"{where}: not a retired partition record of format {RETIRED_FORMAT}")
            partition = str(doc["partition"])
            pointer = None
            if doc["pointer"] is not None:
                current = SnapshotPlace.from_json(doc["pointer"]["current"], path=where)
                if current is None:
                    raise CorruptPayload(f"{where}: a retired snapshot pointer without a current place")
                pointer = SnapshotPointerNode(partition, current,
                                              SnapshotPlace.from_json(doc["pointer"]["previous"], path=where))
            lineage = None if doc["lineage"] is None else _lineage(doc["lineage"], path=where)
            return cls(partition, int(doc["retired_through"]), pointer, lineage)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptPayload(f"{where}: unreadable retired partition record ({exc})") from None


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
