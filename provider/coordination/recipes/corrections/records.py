"""The records of re-seals: versions of a sealed (epoch, partition), and the corrections they start.

A partition sealed at an epoch is its **version 1** (the seal under ``epochs/``, never changed). A
re-seal opens version 2, 3, ... of it; each lives here, beside the epochs:

``<pipeline>/reseals/<epoch:010d>:<partition>``
    :class:`VersionsNode`: every version after the first (open or sealed, with the request that opened
    it and the correction it belongs to) and the votes cast so far under the open one. Every write is
    one compare-and-set on this node, which is what fences a vote to its version and keeps one re-seal
    in flight.
``<pipeline>/reseals/<epoch:010d>:<partition>/v-<version:010d>``
    :class:`SealedVersion`: a sealed version, create-only; its creation zxid orders it against the
    seals that read it.
``<pipeline>/corrections/<correction id>``
    :class:`CorrectionNode`: a correction (the re-seal a user asked for) and its plan, the seals it
    makes stale, in the order they are re-produced.

A read of another partition of the same pipeline is named in a seal's lineage vector by
:func:`read_key` (``"<pipeline>:<partition>"`` mapped to the epoch read), next to upstream pipelines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths, epoch_key
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.records import MAX_VERSION_NUMBER as _MAX_VERSION_NUMBER
from airflow_epochs.coordination.wire.vote_records import read_versions, union_read_versions

# Versions one opening of an (epoch, partition) may have: its node stays a few KB.
MAX_VERSIONS = 64
# The largest version number (numbering goes on across the epoch's openings, see VersionsNode.floor);
# the kernel's records hold it, since a vote names the versions it read.
MAX_VERSION_NUMBER = _MAX_VERSION_NUMBER
# Seals one correction may make stale (its plan is one znode).
MAX_PLAN = 1500
MAX_REASON = 500


def read_key(pipeline: str, partition: str) -> str:
    """The lineage-vector key naming ``partition`` of ``pipeline`` (value: the epoch read), e.g.
    ``upstream={read_key("nyc", "weather"): 8}`` for a producer that read ``weather`` at epoch 8."""
    return f"{validate_name('pipeline', pipeline)}:{validate_name('partition', partition)}"


def partition_read(pipeline: str, key: str) -> str | None:
    """The partition of ``pipeline`` that lineage key ``key`` names, or None (an upstream pipeline)."""
    prefix = f"{pipeline}:"
    return key[len(prefix):] if key.startswith(prefix) and len(key) > len(prefix) else None


def reseals_dir(paths: PipelinePaths) -> str:
    return f"{paths.base}/reseals"


def versions_path(paths: PipelinePaths, epoch: int, partition: str) -> str:
    return f"{reseals_dir(paths)}/{epoch_key(epoch)}:{validate_name('partition', partition)}"


def version_path(paths: PipelinePaths, epoch: int, partition: str, version: int) -> str:
    return f"{versions_path(paths, epoch, partition)}/v-{version:010d}"


def corrections_dir(paths: PipelinePaths) -> str:
    return f"{paths.base}/corrections"


def correction_id(epoch: int, partition: str, version: int) -> str:
    """The id of the correction that re-sealing ``partition`` at ``epoch`` as ``version`` starts."""
    return f"{epoch_key(epoch)}:{partition}:v{version}"


def correction_path(paths: PipelinePaths, correction: str) -> str:
    return f"{corrections_dir(paths)}/{correction}"


@dataclass(frozen=True)
class VersionVote:
    """A producer's vote under a version: what it wrote, the snapshot it leaves and what it read (and,
    for the partitions of its pipeline, which version of them: ``read_versions``, absent in older votes)."""

    producer: str
    manifest: Mapping[str, Any]
    snapshot: Any
    upstream: Mapping[str, int]
    request: str
    voted_at: float
    read_versions: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "manifest": dict(self.manifest), "snapshot": self.snapshot, "upstream": dict(self.upstream),
            "request": self.request, "voted_at": self.voted_at}
        if self.read_versions:
            body["read_versions"] = dict(self.read_versions)
        return body

    @classmethod
    def from_json(cls, producer: str, body: Any, where: str) -> VersionVote:
        if not isinstance(body, dict) or not isinstance(body.get("manifest"), dict) \
                or not isinstance(body.get("upstream"), dict) or not isinstance(body.get("request"), str):
            raise CorruptPayload(f"{where}: the vote of {producer!r} is malformed")
        upstream = {str(k): int(v) for k, v in body["upstream"].items()}
        return cls(producer, body["manifest"], body.get("snapshot"), upstream, body["request"],
                   float(body.get("voted_at", 0.0)), read_versions(body.get("read_versions"), upstream, where))


@dataclass(frozen=True)
class VersionEntry:
    """One version after the first: ``open`` (producers re-producing it) or ``sealed``."""

    version: int
    state: str
    request: str  # the re-seal request that opened it ("" when a correction opened it)
    reason: str
    correction: str  # the correction it belongs to (its own id for the version a user asked for)
    opened_at: float
    sealed_at: float | None = None

    def to_json(self) -> list[Any]:
        return [self.version, self.state, self.request, self.reason, self.correction, self.opened_at, self.sealed_at]

    @classmethod
    def from_json(cls, row: Any, where: str) -> VersionEntry:
        if not isinstance(row, list) or len(row) != 7 or not isinstance(row[0], int) or row[1] not in ("open",
                                                                                                          "sealed"):
            raise CorruptPayload(f"{where}: a version entry is malformed: {str(row)[:80]}")
        return cls(int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), float(row[5]),
                   None if row[6] is None else float(row[6]))


@dataclass(frozen=True)
class VersionsNode:
    """The versions of one (epoch, partition) after the first, and the open one's votes. ``generation`` is
    the opening of the epoch whose seal they version: after a rollback re-opens the epoch, versions of an
    older generation are history, never read as the newest."""

    epoch: int
    partition: str
    entries: tuple[VersionEntry, ...] = ()
    votes: Mapping[str, VersionVote] = field(default_factory=dict)
    generation: int = 1
    floor: int = 1  # numbers up to here were taken by older generations' versions (their documents stay)

    @property
    def open(self) -> VersionEntry | None:
        return next((e for e in self.entries if e.state == "open"), None)

    @property
    def latest(self) -> int:
        """The newest sealed version (1: only the original seal)."""
        return max((e.version for e in self.entries if e.state == "sealed"), default=1)

    @property
    def next_version(self) -> int:
        return max((e.version for e in self.entries), default=self.floor) + 1

    def entry(self, version: int) -> VersionEntry | None:
        return next((e for e in self.entries if e.version == version), None)

    def to_bytes(self) -> bytes:
        return payloads.encode("versions", {
            "epoch": self.epoch, "partition": self.partition, "latest": self.latest, "generation": self.generation,
            "floor": self.floor,
            "versions": [e.to_json() for e in self.entries],
            "votes": {name: vote.to_json() for name, vote in sorted(self.votes.items())}})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> VersionsNode:
        doc = payloads.decode("versions", raw, path=path)
        votes = doc.get("votes", {})
        if not isinstance(votes, dict):
            raise CorruptPayload(f"{path}: votes is not an object")
        return cls(int(doc["epoch"]), str(doc["partition"]),
                   tuple(VersionEntry.from_json(row, path) for row in doc["versions"]),
                   {name: VersionVote.from_json(name, body, path) for name, body in votes.items()},
                   int(doc.get("generation", 1)), int(doc.get("floor", 1)))

    def of_generation(self, generation: int) -> VersionsNode:
        """These versions if they version ``generation``'s seal, else none (a fresh node of that generation)."""
        if self.generation == generation:
            return self
        return VersionsNode(self.epoch, self.partition, generation=generation, floor=self.next_version - 1)


@dataclass(frozen=True)
class SealedVersion:
    """A sealed version of (epoch, partition): its votes, the union of what they read, and why it was made.
    ``zxid`` is the creation zxid of its znode (0 before it is written)."""

    epoch: int
    partition: str
    version: int
    request: str
    reason: str
    correction: str
    opened_at: float
    sealed_at: float
    votes: Mapping[str, VersionVote]
    zxid: int = 0

    @property
    def upstream(self) -> dict[str, int]:
        """The lineage vector: per key, the newest epoch any producer read."""
        out: dict[str, int] = {}
        for vote in self.votes.values():
            for key, epoch in vote.upstream.items():
                out[key] = max(out.get(key, 0), int(epoch))
        return out

    @property
    def read_versions(self) -> dict[str, int]:
        """Per lineage key, the oldest version of it its votes read (see ``union_read_versions``)."""
        return union_read_versions(self.votes.values(), self.upstream)

    def to_bytes(self) -> bytes:
        return payloads.encode("sealed_version", {
            "epoch": self.epoch, "partition": self.partition, "version": self.version, "request": self.request,
            "reason": self.reason, "correction": self.correction, "opened_at": self.opened_at,
            "sealed_at": self.sealed_at, "votes": {n: v.to_json() for n, v in sorted(self.votes.items())}})

    @classmethod
    def from_bytes(cls, raw: bytes, zxid: int, *, path: str) -> SealedVersion:
        doc = payloads.decode("sealed_version", raw, path=path)
        return cls(int(doc["epoch"]), str(doc["partition"]), int(doc["version"]), str(doc["request"]),
                   str(doc.get("reason", "")), str(doc.get("correction", "")), float(doc.get("opened_at", 0.0)),
                   float(doc["sealed_at"]),
                   {name: VersionVote.from_json(name, body, path) for name, body in doc["votes"].items()}, zxid)


@dataclass(frozen=True)
class CorrectionNode:
    """A correction: the re-sealed origin, and the stale seals it re-produces (``plan``, in order).

    ``state``: ``planning`` (origin sealed, plan not computed yet), ``marking`` (plan written; the
    stale seals get their new version opened, then re-produced), ``done`` (every planned seal has
    its new version sealed and nothing sealed since read a stale one) or ``rolled_back`` (a rollback
    re-opened the corrected epoch)."""

    id: str
    origin: tuple[int, str, int]
    request: str
    reason: str
    state: str
    plan: tuple[tuple[int, str], ...] = ()
    created_at: float = 0.0
    done_at: float | None = None

    def to_bytes(self) -> bytes:
        return payloads.encode("correction", {
            "id": self.id, "origin": list(self.origin), "request": self.request, "reason": self.reason,
            "state": self.state, "plan": [list(item) for item in self.plan], "created_at": self.created_at,
            "done_at": self.done_at})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> CorrectionNode:
        doc = payloads.decode("correction", raw, path=path)
        origin = doc["origin"]
        if len(origin) != 3 or doc["state"] not in ("planning", "marking", "done", "rolled_back"):
            raise CorruptPayload(f"{path}: malformed correction")
        plan = tuple((int(item[0]), str(item[1])) for item in doc["plan"])
        return cls(str(doc["id"]), (int(origin[0]), str(origin[1]), int(origin[2])), str(doc["request"]),
                   str(doc.get("reason", "")), str(doc["state"]), plan, float(doc.get("created_at", 0.0)),
                   None if doc.get("done_at") is None else float(doc["done_at"]))


@dataclass(frozen=True)
class Reseal:
    """The answer of a re-seal request: the version it opened of (epoch, partition), and its state now
    (``open`` while producers re-produce it, ``sealed`` once their votes sealed it)."""

    pipeline: str
    epoch: int
    partition: str
    version: int
    state: str
    request: str
    reason: str
    correction: str


@dataclass(frozen=True)
class VersionVoteResult:
    """The answer of a vote under a version: whether it sealed the version, and whether it was a repeat."""

    epoch: int
    partition: str
    version: int
    producer: str
    sealed: bool
    duplicate: bool = False
