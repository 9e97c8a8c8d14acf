"""The vote records: a vote as its znode or its seal keeps it, and the votes folded into a seal.

When a partition of several producers seals, its seal keeps every vote (request id, manifest,
snapshot pointer, lineage vector, when it came) and the vote znodes are deleted in the seal's own
transaction, so a sealed partition is one znode. A sole producer's vote was always kept in its seal
(under ``vote``); several producers' votes are kept under ``votes``, by producer. A repeated vote, a
reader or the archive finds a folded vote exactly as it found the vote znode.

If the folded seal would not fit :data:`~.payloads.MAX_PAYLOAD_BYTES` (large manifests), the votes
keep their znodes and the seal is written without them (``FoldedVotes.of`` answers None then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.base.znode import Znode
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.records import MAX_VERSION_NUMBER, VoteRecord


@dataclass(frozen=True)
class CastVote:
    """One vote as written: its own znode (``kind`` vote) or an entry of a seal's folded votes."""

    producer: str
    attempt: int
    manifest: Mapping[str, Any]
    request: str
    voted_at: float
    snapshot: Any = None
    upstream: Mapping[str, int] = field(default_factory=dict)
    # lineage key (a partition of this pipeline) -> the version of it read (older votes: none)
    read_versions: Mapping[str, int] = field(default_factory=dict)

    def znode_bytes(self) -> bytes:
        """The vote znode's payload, compact (an open epoch holds a znode per vote, so its bytes are
        most of what a fleet keeps in ZooKeeper mid-epoch): ``[schema, "vote", request, voted_at,
        manifest]``, plus ``{"snapshot", "upstream", "read_versions"}`` when the vote has any. The producer and the
        attempt are in its path. Older vote znodes (the object form) still read (:meth:`from_znode`)."""
        fields: list[Any] = [self.request, self.voted_at, dict(self.manifest)]
        extra: dict[str, Any] = {}
        if self.snapshot is not None:
            extra["snapshot"] = self.snapshot
        if self.upstream:
            extra["upstream"] = dict(self.upstream)
        if self.read_versions:
            extra["read_versions"] = dict(self.read_versions)
        if extra:
            fields.append(extra)
        return payloads.encode_row("vote", fields)

    def folded_body(self) -> dict[str, Any]:
        """The entry kept in the seal (the producer is its key, the attempt the seal's): defaults left out."""
        body: dict[str, Any] = {"request": self.request, "manifest": dict(self.manifest), "voted_at": self.voted_at}
        if self.snapshot is not None:
            body["snapshot"] = self.snapshot
        if self.upstream:
            body["upstream"] = dict(self.upstream)
        if self.read_versions:
            body["read_versions"] = dict(self.read_versions)
        return body

    def embedded_body(self) -> dict[str, Any]:
        """A sole producer's vote inside its seal (``vote``), as it has always been written."""
        body: dict[str, Any] = {
            "producer": self.producer, "manifest": dict(self.manifest), "snapshot": self.snapshot,
            "upstream": dict(self.upstream), "voted_at": self.voted_at, "request": self.request}
        if self.read_versions:
            body["read_versions"] = dict(self.read_versions)
        return body

    def record(self, epoch: int, partition: str) -> VoteRecord:
        return VoteRecord(epoch, partition, self.producer, self.attempt, self.manifest, self.snapshot,
                          self.request, self.voted_at)

    @classmethod
    def from_znode(cls, raw: bytes, path: str, producer: str, attempt: int) -> CastVote:
        """The vote znode at ``path`` (of ``producer`` under ``attempt``); votes written before the
        producer and attempt left the payload name them, and must agree with the path; votes written
        before the compact form are objects."""
        if payloads.is_row(raw):
            return cls._from_row(payloads.decode_row("vote", raw, path=path), path, producer, attempt)
        doc = payloads.decode("vote", raw, path=path)
        if doc.get("producer", producer) != producer or doc.get("attempt", attempt) != attempt:
            raise CorruptPayload(f"{path}: the vote names another producer or attempt than its path")
        upstream = _upstream(doc.get("upstream"), path)
        return cls(producer, attempt, doc["manifest"], str(doc["request"]), float(doc["voted_at"]),
                   doc.get("snapshot"), upstream, read_versions(doc.get("read_versions"), upstream, path))

    @classmethod
    def _from_row(cls, fields: list[Any], path: str, producer: str, attempt: int) -> CastVote:
        extra: Any = fields[3] if len(fields) == 4 else {}
        if len(fields) not in (3, 4) or not isinstance(fields[0], str) or isinstance(fields[1], bool) \
                or not isinstance(fields[1], (int, float)) or not isinstance(fields[2], dict) \
                or not isinstance(extra, dict) or not set(extra) <= {"snapshot", "upstream", "read_versions"}:
            raise CorruptPayload(f"{path}: a compact vote must be [schema, 'vote', request, voted_at, manifest"
                                 f"(, {{snapshot, upstream, read_versions}})], not {fields!r:.200}")
        upstream = _upstream(extra.get("upstream"), path)
        return cls(producer, attempt, fields[2], fields[0], float(fields[1]), extra.get("snapshot"), upstream,
                   read_versions(extra.get("read_versions"), upstream, path))

    @classmethod
    def from_folded(cls, producer: str, attempt: int, body: object, path: str) -> CastVote:
        if not isinstance(body, Mapping) or not isinstance(body.get("request"), str) \
                or not isinstance(body.get("manifest"), dict) \
                or not isinstance(body.get("voted_at"), (int, float)) or isinstance(body.get("voted_at"), bool):
            raise CorruptPayload(f"{path}: the folded vote of {producer!r} does not fit the schema")
        upstream = _upstream(body.get("upstream"), path)
        return cls(producer, attempt, body["manifest"], body["request"], float(body["voted_at"]),
                   body.get("snapshot"), upstream, read_versions(body.get("read_versions"), upstream, path))

    @classmethod
    def from_embedded(cls, attempt: int, body: Mapping[str, Any], path: str) -> CastVote:
        if not isinstance(body.get("producer"), str) or not isinstance(body.get("manifest"), dict):
            raise CorruptPayload(f"{path}: the vote kept in the seal does not fit the schema")
        upstream = _upstream(body.get("upstream"), path)
        return cls(body["producer"], attempt, body["manifest"], str(body.get("request", "")),
                   float(body.get("voted_at", 0.0)), body.get("snapshot"), upstream,
                   read_versions(body.get("read_versions"), upstream, path))


def _upstream(value: object, path: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in value.values()):
        raise CorruptPayload(f"{path}: a vote's upstream is not a map of pipeline names to epochs")
    return {str(k): int(v) for k, v in value.items()}


def read_versions(value: object, upstream: Mapping[str, int], path: str) -> dict[str, int]:
    """A stored ``read_versions`` map (absent in records written before it: empty, so the reader is judged
    by when it read); every key one of ``upstream``'s, every value a version number."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k in upstream and isinstance(v, int) and not isinstance(v, bool)
            and 1 <= v <= MAX_VERSION_NUMBER for k, v in value.items()):
        raise CorruptPayload(f"{path}: read_versions is not a map of the lineage keys it names to version numbers "
                             f"in 1..{MAX_VERSION_NUMBER}: {value!r:.120}")
    return {str(k): int(v) for k, v in value.items()}


class VersionedReads(Protocol):
    """A vote as :func:`union_read_versions` reads it: what it read, and which versions of that."""

    @property
    def upstream(self) -> Mapping[str, int]: ...

    @property
    def read_versions(self) -> Mapping[str, int]: ...


def union_read_versions(votes: Iterable[VersionedReads], upstream: Mapping[str, int]) -> dict[str, int]:
    """The versions a seal read: per lineage key, the oldest version read by the producers that read the
    epoch ``upstream`` names (the one a correction judges); a key is left out when one of them did not
    say (it is judged by when it read)."""
    out: dict[str, int] = {}
    missing: set[str] = set()
    for vote in votes:
        for key, epoch in vote.upstream.items():
            if epoch != upstream.get(key):
                continue
            version = vote.read_versions.get(key)
            if version is None:
                missing.add(key)
            else:
                out[key] = min(out.get(key, version), version)
    return {key: version for key, version in out.items() if key not in missing}


@dataclass(frozen=True)
class FoldedVotes:
    """The votes a seal keeps, by producer (a sole producer's, or every producer's once folded)."""

    attempt: int
    votes: Mapping[str, CastVote]

    def get(self, producer: str) -> CastVote | None:
        return self.votes.get(producer)

    def names(self) -> list[str]:
        return sorted(self.votes)

    @classmethod
    def of(cls, seal: Mapping[str, Any], path: str) -> FoldedVotes | None:
        """The votes kept in the seal document ``seal``, or None if its votes have znodes of their own."""
        attempt = int(seal["attempt"])
        sole = seal.get("vote")
        if isinstance(sole, Mapping):
            vote = CastVote.from_embedded(attempt, sole, path)
            return cls(attempt, {vote.producer: vote})
        folded = seal.get("votes")
        if folded is None:
            return None
        if not isinstance(folded, Mapping):
            raise CorruptPayload(f"{path}: the seal's folded votes are not a map of producers")
        return cls(attempt, {str(name): CastVote.from_folded(str(name), attempt, body, path)
                             for name, body in folded.items()})


def folded_body(votes: Mapping[str, CastVote]) -> dict[str, Any]:
    """The seal's ``votes`` field for ``votes`` (several producers)."""
    return {name: vote.folded_body() for name, vote in sorted(votes.items())}


def folded_vote(raw: Znode | None, producer: str, path: str) -> CastVote | None:
    """``producer``'s vote kept in the seal ``raw`` (a sole producer's, or folded), or None."""
    if raw is None:
        return None
    folded = FoldedVotes.of(payloads.decode("seal", raw.data, path=path), path)
    return None if folded is None else folded.get(producer)


@dataclass(frozen=True)
class SealNode:
    """A partition's seal as stored: who sealed it (attempt, opening, request), when, the lineage
    vector, which producers left snapshots (indices into the configured producers) and the votes it keeps."""

    partition: str
    attempt: int
    generation: int
    sealed_at: float
    request: str
    config_version: int
    producer_count: int  # how many producers the seal counts (stored as ``producers``)
    snapshot_producers: tuple[int, ...]
    upstream: Mapping[str, int]
    first_vote_at: float
    votes: FoldedVotes | None = None  # None: the votes have znodes of their own
    sole: bool = False  # the votes are a sole producer's (kept under ``vote``, it never had a znode)
    read_versions: Mapping[str, int] = field(default_factory=dict)  # see SealRecord.read_versions

    def to_bytes(self) -> bytes:
        """The seal's payload (:class:`~.errors.PayloadTooLarge` if the votes it keeps do not fit)."""
        body: dict[str, Any] = {
            "partition": self.partition, "attempt": self.attempt, "generation": self.generation,
            "sealed_at": self.sealed_at, "request": self.request, "config_version": self.config_version,
            "producers": self.producer_count, "snapshot_producers": list(self.snapshot_producers),
            "first_vote_at": self.first_vote_at, "upstream": dict(self.upstream)}
        if self.read_versions:
            body["read_versions"] = dict(self.read_versions)
        if self.votes is not None and self.sole:
            (only,) = self.votes.votes.values()
            body["vote"] = only.embedded_body()
        elif self.votes is not None:
            body["votes"] = folded_body(self.votes.votes)
        return payloads.encode("seal", body)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> SealNode:
        doc = payloads.decode("seal", raw, path=path)
        sealed_at = float(doc["sealed_at"])
        upstream = _upstream(doc.get("upstream"), path)
        return cls(str(doc["partition"]), int(doc["attempt"]), int(doc["generation"]), sealed_at,
                   str(doc["request"]), int(doc["config_version"]), int(doc["producers"]),
                   tuple(int(i) for i in doc["snapshot_producers"]), upstream,
                   float(doc.get("first_vote_at", sealed_at)), FoldedVotes.of(doc, path),
                   isinstance(doc.get("vote"), Mapping), read_versions(doc.get("read_versions"), upstream, path))
