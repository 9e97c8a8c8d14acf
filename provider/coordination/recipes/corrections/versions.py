"""Reads of re-sealed versions (see :mod:`..wire.versions`): the versions of an (epoch, partition), a
sealed version, the newest version's lineage, a correction, and snapshots as the newest versions left them.

Version 1 is the original seal (under ``epochs/``); versions 2, 3, ... are read from ``reseals/``. A
partition never re-sealed costs one read more than before (its versions node is absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.recipes.corrections.records import (
    CorrectionNode,
    SealedVersion,
    VersionsNode,
    correction_path,
    version_path,
    versions_path,
)
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import decode_seal, seal_info, seal_record
from airflow_epochs.coordination.wire.nodes import EpochNode
from airflow_epochs.coordination.wire.records import SealRecord, SnapshotRef


def versions_node(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> Found[VersionsNode] | None:
    """The versions node of (epoch, partition) and its stat, or None if it was never re-sealed."""
    path = versions_path(ctx.paths, epoch, partition)
    raw = call.get(path)
    return None if raw is None else Found(VersionsNode.from_bytes(raw.data, path=path), raw.stat)


def current_versions(call: Call, ctx: PipelineContext, epoch: int, partition: str,
                     generation: int) -> VersionsNode | None:
    """The versions of the seal of ``generation`` (None if that seal was never re-sealed)."""
    found = versions_node(call, ctx, epoch, partition)
    return None if found is None or found.record.generation != generation else found.record


def sealed_version(call: Call, ctx: PipelineContext, epoch: int, partition: str, version: int) -> SealedVersion | None:
    """Sealed version ``version`` (>= 2) of (epoch, partition), or None."""
    path = version_path(ctx.paths, epoch, partition, version)
    raw = call.get(path)
    return None if raw is None else SealedVersion.from_bytes(raw.data, int(raw.stat.czxid), path=path)


def correction(call: Call, ctx: PipelineContext, correction_id: str) -> Found[CorrectionNode] | None:
    path = correction_path(ctx.paths, correction_id)
    raw = call.get(path)
    return None if raw is None else Found(CorrectionNode.from_bytes(raw.data, path=path), raw.stat)


@dataclass(frozen=True)
class LatestLineage:
    """The newest sealed version of (epoch, partition): its number, its lineage vector, the versions it
    read of the partitions of its pipeline (``read_versions``: keys its producers named; older seals name
    none), and the zxid after which whatever it read was read (the attempt's start for version 1, the
    version's opening otherwise: a producer reads its inputs after that), which judges a key it did not
    name a version for."""

    version: int
    upstream: dict[str, int]
    read_after: int
    read_versions: dict[str, int] = field(default_factory=dict)


def latest_lineage(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> LatestLineage | None:
    """The lineage of the newest sealed version of (epoch, partition); None if it is not sealed."""
    seal = seal_record(call, ctx, epoch, partition)
    if seal is None:
        return None
    node = current_versions(call, ctx, epoch, partition, seal.generation)
    if node is not None and node.latest > 1:
        doc = sealed_version(call, ctx, epoch, partition, node.latest)
        if doc is not None:
            return LatestLineage(doc.version, doc.upstream, doc.zxid, doc.read_versions)
    attempt = call.exists(ctx.paths.attempt(epoch, seal.attempt))
    return LatestLineage(1, dict(seal.upstream), int(attempt.czxid) if attempt is not None else seal.zxid,
                         dict(seal.read_versions))


def lineages_at(call: Call, ctx: PipelineContext, epoch: int,
                partitions: list[str]) -> dict[str, LatestLineage | None]:
    """:func:`latest_lineage` of several partitions of one epoch in three pipelined rounds (versions and
    the epoch record; the seals and newest versions; the attempts), not four reads a partition."""
    record_raw, *versions_raws = call.get_many([ctx.paths.epoch(epoch),
                                                *(versions_path(ctx.paths, epoch, p) for p in partitions)])
    if record_raw is None:  # compacted or never opened: one by one (the archive answers for compacted epochs)
        return {p: latest_lineage(call, ctx, epoch, p) for p in partitions}
    generation = EpochNode.from_bytes(record_raw.data, path=ctx.paths.epoch(epoch)).generation
    nodes = {p: None if raw is None else
             VersionsNode.from_bytes(raw.data, path=versions_path(ctx.paths, epoch, p)).of_generation(generation)
             for p, raw in zip(partitions, versions_raws, strict=True)}
    wanted = [(p, version_path(ctx.paths, epoch, p, node.latest)) if node is not None and node.latest > 1
              else (p, ctx.paths.seal(epoch, generation, p)) for p, node in nodes.items()]
    out: dict[str, LatestLineage | None] = {}
    seals: dict[str, SealRecord] = {}
    for (partition, path), raw in zip(wanted, call.get_many([path for _, path in wanted]), strict=True):
        node = nodes[partition]
        if raw is None:
            out[partition] = None
        elif node is not None and node.latest > 1:
            doc = SealedVersion.from_bytes(raw.data, int(raw.stat.czxid), path=path)
            out[partition] = LatestLineage(doc.version, doc.upstream, doc.zxid, doc.read_versions)
        else:
            seals[partition] = decode_seal(raw, epoch, partition, path)
    stats = call.exists_many([ctx.paths.attempt(epoch, seal.attempt) for seal in seals.values()])
    for (partition, seal), stat in zip(seals.items(), stats, strict=True):
        out[partition] = LatestLineage(1, dict(seal.upstream), int(stat.czxid) if stat is not None else seal.zxid,
                                       dict(seal.read_versions))
    return {p: out.get(p) for p in partitions}


@dataclass(frozen=True)
class VersionView:
    """A sealed version of (epoch, partition) as a reader sees it: the manifests and snapshots of its
    producers, its lineage, and, when a newer version exists, the correction that superseded it and
    when that one landed (``resealed_at``; None while it is being re-produced)."""

    epoch: int
    partition: str
    version: int
    latest: int
    manifests: dict[str, dict[str, Any]]
    snapshots: dict[str, Any]
    upstream: dict[str, int]
    sealed_at: float
    attempt: int = 0  # the attempt that sealed version 1 (re-produced versions write under its run folders)
    correction: str = ""  # the correction this version belongs to ("" for version 1)
    stale_by: str = ""  # the correction of the next version, when there is one (open or sealed)
    resealed_at: float | None = None

    @property
    def stale(self) -> bool:
        return bool(self.stale_by)


def version_view(call: Call, ctx: PipelineContext, epoch: int, partition: str,
                 version: int | None = None) -> VersionView | None:
    """``version`` of (epoch, partition) (None: the newest sealed), or None if there is no such sealed version."""
    info = seal_info(call, ctx, epoch, partition)
    if info is None:
        return None
    node = current_versions(call, ctx, epoch, partition, info.generation) or VersionsNode(epoch, partition)
    wanted = node.latest if version is None else version
    if wanted == 1:
        view = VersionView(epoch, partition, 1, node.latest, {k: dict(v) for k, v in info.manifests.items()},
                           dict(info.snapshots), dict(info.upstream), info.sealed_at, info.attempt)
    else:
        entry = node.entry(wanted)
        doc = sealed_version(call, ctx, epoch, partition, wanted) if entry is not None else None
        if doc is None or entry is None or entry.state != "sealed":
            return None
        view = VersionView(epoch, partition, wanted, node.latest,
                           {name: dict(v.manifest) for name, v in doc.votes.items()},
                           {name: v.snapshot for name, v in doc.votes.items() if v.snapshot is not None},
                           doc.upstream, doc.sealed_at, info.attempt, doc.correction)
    newer = min((e for e in node.entries if e.version > wanted), key=lambda e: e.version, default=None)
    if newer is not None:
        view = replace(view, stale_by=newer.correction, resealed_at=newer.sealed_at)
    return view


def newest_snapshots(call: Call, ctx: PipelineContext, refs: dict[str, SnapshotRef]) -> dict[str, SnapshotRef]:
    """``refs`` (producer -> the snapshot sealed at an epoch) with each pointer replaced by the one the
    newest sealed version of that (epoch, partition) left, and that version's number: a producer that
    reads the snapshot after a re-seal reads the corrected one (and names the version in its vote's
    ``read_versions``). One read per distinct epoch (none re-sealed: one read)."""
    out = dict(refs)
    for epoch, partition in sorted({(ref.epoch, ref.partition) for ref in refs.values()}):
        found = versions_node(call, ctx, epoch, partition)
        if found is None or found.record.latest <= 1:
            continue
        seal = seal_record(call, ctx, epoch, partition)
        if seal is None or seal.generation != found.record.generation:
            continue  # versions of a rolled-back opening: history
        doc = sealed_version(call, ctx, epoch, partition, found.record.latest)
        if doc is None:
            continue
        for producer, ref in refs.items():
            vote = doc.votes.get(producer)
            if ref.epoch == epoch and vote is not None and vote.snapshot is not None:
                out[producer] = replace(ref, pointer=vote.snapshot, version=doc.version)
    return out
