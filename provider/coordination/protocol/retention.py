"""Retention: keep the newest ``retain_epochs`` epochs behind the frontier in full and compact the
older ones, so a pipeline's znodes do not grow with the epochs behind it.

Compacting epochs up to c keeps what later epochs need and drops the rest:

- kept: the frontier; each partition's snapshot pointer and (without an archive) the at most two
  epochs it points at, which stay in full until newer snapshots replace them; the lineage vector of
  each partition's newest compacted seal, the place of its newest compacted seal that left a snapshot
  (without an archive that epoch stays in full too: a rollback to the compaction point resets the
  pointer to it) and the count of compacted epochs (in ``archive``); with an
  archive, a partition no live configuration names leaves (:mod:`.retired_partitions`);
- dropped: the epochs' attempts, votes, seals and barriers, their history events and the
  pipeline-level events older than epoch c's seal, and the pipeline-level request ids older than
  the previous compaction's newest epoch's seal (one compaction behind: a request sent while epoch c
  was open is still found when repeated).

The recipe families keep records of their own beside the epochs (deadlines' statistics and late alerts,
delivery cursors). Retention knows none of them: each family hands it a :class:`CompactionStep` (the
face passes them all to :func:`compact`, the way Curator's ``Reaper`` is handed paths), which may hold
compaction back (a delivery cursor that has not passed an epoch), fold what it keeps of the epochs
before they go, and trim its own records of the compacted epochs.

Only sealed epochs at least ``retain_epochs`` behind the frontier are compacted, so no live attempt
can be touched (an attempt of such an epoch is not current: its writes fail their fence). The first
step (one transaction) moves ``compacted_through`` and writes the summary; the deletions after it
are idempotent, so a compaction cut short is finished by the next one.

With an ``archive`` location in the configuration, each epoch's full record (its subtree and the
history events pruned with it) is written to the pipeline's storage before any of it is deleted
(:mod:`.archive`), and then deleted, pinned epochs too: the snapshots they carry are read from the
archive then. A compaction killed between the archive write and the deletions is finished by the
next one, which finds the file and verifies it instead of writing it again. With an archive the
default window is 0: the frontier epoch itself is compacted (the next opening needs nothing of it,
a repeated vote of it is answered from the archive), so mid-epoch ZooKeeper holds the open epoch and
the pipeline-level nodes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.exceptions import NoNodeError, NotEmptyError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.paths import child_path
from airflow_epochs.coordination.base.steps import Create, Delete, SetData, Step, first_failure
from airflow_epochs.coordination.state import archive
from airflow_epochs.coordination.state.history import READ_BATCH, commit, event_sequences
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record, frontier
from airflow_epochs.coordination.state.retired_partitions import (
    newest_retired,
    partitions_of,
    retire,
    versions_in_force,
)
from airflow_epochs.coordination.state.snapshots import newest_snapshot_place
from airflow_epochs.coordination.wire.compaction_record import CompactedLineage, CompactionSummary
from airflow_epochs.coordination.wire.events import Compacted
from airflow_epochs.coordination.wire.nodes import PipelineRecord, SnapshotPlace, SnapshotPointerNode
from airflow_epochs.coordination.wire.vote_records import SealNode

# Deletions per transaction (a multi-op's request must stay well under ZooKeeper's 1 MB).
_DELETE_BATCH = 400


@dataclass(frozen=True)
class CompactionStep:
    """What one recipe family does when its pipeline's epochs are compacted; every part is optional.

    :param family: the family's name, the key of what it trimmed in :attr:`CompactionReport.trimmed`.
    :param floor: the newest epoch the family lets compaction reach (None: no limit); the lowest floor
        of all families wins.
    :param before: runs before ``compacted_through`` moves (fold what the family keeps of the epochs
        that are about to go; a compaction cut short runs it again).
    :param trim: runs after the epochs went, with the newest compacted epoch: remove (or archive) the
        family's own records of them; returns how many went.
    """

    family: str
    floor: Callable[[Call, PipelineContext], int | None] | None = None
    before: Callable[[Call, PipelineContext], object] | None = None
    trim: Callable[[Call, PipelineContext, int], int] | None = None


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction did."""

    through: int  # every epoch up to this one is compacted
    compacted: tuple[int, ...]  # epochs whose znodes this call removed
    kept: tuple[int, ...]  # compacted epochs kept in full because a snapshot pointer names them
    znodes_deleted: int
    events_pruned: int
    archived: tuple[int, ...] = ()  # epochs whose archive file this call wrote
    verified: tuple[int, ...] = ()  # epochs whose archive file was there already and agreed with ZooKeeper
    retired: tuple[str, ...] = ()  # removed partitions whose pointer and lineage entry this call moved to the archive
    trimmed: dict[str, int] = field(default_factory=dict)  # family -> its records this call removed

    @property
    def alerts_pruned(self) -> int:
        """Delivered late alerts of compacted epochs removed (the deadlines family's trim)."""
        return self.trimmed.get("deadlines", 0)


def _pinned_epochs(call: Call, ctx: PipelineContext, epochs: Sequence[int]) -> set[int]:
    """Those of ``epochs`` (compacted, still in ZooKeeper) that a snapshot pointer or the compaction
    summary's ``snapshots`` names: they stay in full while a retry, or a rollback to the compaction
    point, may need their snapshot. Only the partitions sealed in each epoch can name it, so
    their pointers are read by name: the ``snapshots`` folder, one pointer per partition the pipeline
    ever had, is never listed (each answer here is one epoch's seals, at most 256)."""
    pinned: set[int] = set()
    summary_raw = call.get(ctx.paths.archive)
    if summary_raw is not None:  # each partition's newest compacted snapshot, named by the summary
        summary = CompactionSummary.from_bytes(summary_raw.data, path=ctx.paths.archive)
        pinned |= {place.epoch for place in summary.snapshots.values()} & set(epochs)
    records = [epoch_record(call, ctx, epoch) for epoch in epochs]
    for epoch, found in zip(epochs, records, strict=True):
        if found is None or epoch in pinned:
            continue
        names = call.children(ctx.paths.seals(epoch, int(found.record.generation))) or []
        paths = [ctx.paths.snapshot_pointer(name) for name in names]
        for path, raw in zip(paths, call.get_many(paths), strict=True):
            if raw is None:
                continue
            pointer = SnapshotPointerNode.from_bytes(raw.data, path=path)
            if any(place is not None and place.epoch == epoch for place in (pointer.current, pointer.previous)):
                pinned.add(epoch)
                break
    return pinned


def _mark(call: Call, ctx: PipelineContext, steps: Sequence[CompactionStep],
          max_epochs: int | None) -> tuple[int, int | None, int | None]:
    """Step 1: move ``compacted_through`` and update the summary; returns (new, history zxid,
    request zxid: the previous compaction's history zxid)."""
    record = ctx.record(call)
    current = frontier(call, ctx)
    version = ctx.config_for(call, max(current, record.first_epoch), record)
    retain = version.config.retain_epochs
    archive_raw = call.get(ctx.paths.archive)
    archive = CompactionSummary.from_bytes(archive_raw.data, path=ctx.paths.archive) if archive_raw else None
    old = record.compacted_through
    zxid = archive.history_zxid if archive else None
    requests = archive.requests_zxid if archive else None
    if retain is None or current - retain <= old:
        return old, zxid, requests
    new = current - retain
    if max_epochs is not None:
        new = min(new, old + max_epochs)
    floor = _lowest_floor(call, ctx, steps)
    if floor is not None and floor < new:  # a family still reads those epochs from ZooKeeper: keep them
        new = floor
        if new <= old:
            return old, zxid, requests
    found = epoch_record(call, ctx, new)
    if found is None or found.record.state != "sealed":
        return old, zxid, requests
    lineage = _newest_lineage(call, ctx, new, int(found.record.generation), dict(archive.lineage) if archive else {})
    snapshots = _newest_snapshots(call, ctx, record, old, new, dict(archive.snapshots) if archive else {})
    requests = zxid  # request ids are forgotten one compaction behind the epochs
    zxid = int(found.stat.mzxid)
    summary = CompactionSummary(new, (archive.epochs if archive else 0) + (new - old), zxid, lineage,
                                requests, archive.partitions_through if archive else 0,
                                archive.retiring if archive else None, snapshots,
                                archive.snapshots_from if archive else old).to_bytes()
    ops: list[Step] = [
        SetData(ctx.paths.base, record.to_bytes(compacted_through=new), record.version),
        SetData(ctx.paths.archive, summary, archive_raw.stat.version)
        if archive_raw else Create(ctx.paths.archive, summary),
        *ctx.event(Compacted(from_epoch=old + 1, to_epoch=new, retain_epochs=retain)),
    ]
    results = commit(call, ops)
    if first_failure(ops, results) is not None:
        raise Conflict()
    ctx.known_record = replace(record, compacted_through=new, version=int(results[0].version))
    return new, zxid, requests


def compact(ctx: PipelineContext, *, steps: Sequence[CompactionStep] = (),
            max_epochs: int | None = None) -> CompactionReport:
    """Compact the sealed epochs that fell out of the configuration's ``retain_epochs``; ``steps`` are
    the recipe families' parts (:class:`CompactionStep`)."""

    def sweep(call: Call) -> CompactionReport:
        """Steps 2-4: delete what the summary replaced (idempotent: a cut-short run is finished here)."""
        _fold_first(call, ctx, steps)
        through, zxid, requests = _mark(call, ctx, steps, max_epochs)
        due = sorted(int(n) for n in call.children(ctx.paths.epochs) or [] if n.isdigit() and int(n) <= through)
        locations = {epoch: archive.archive_location(call, ctx, epoch) for epoch in due}
        # archived, a pinned epoch's snapshots are read there: only epochs kept in full are checked
        pinned = _pinned_epochs(call, ctx, [epoch for epoch in due if locations[epoch] is None])
        compacted: list[int] = []
        kept: list[int] = []
        outcomes: dict[str, list[int]] = {"written": [], "verified": [], "gone": []}
        deleted = 0
        for epoch in due:
            location = locations[epoch]
            known: tuple[str, ...] | None = None
            if location is not None:  # the past goes to storage before it leaves ZooKeeper
                outcome = archive.archive_epoch(call, ctx, epoch, location)
                outcomes[outcome.status].append(epoch)
                known = outcome.znodes or None
            if epoch in pinned:
                kept.append(epoch)
                continue
            deleted += delete_tree(call, ctx.paths.epoch(epoch), known)
            compacted.append(epoch)
        pruned = _prune_history(call, ctx, zxid) if zxid is not None else 0
        if requests is not None:
            deleted += _prune_requests(call, ctx, requests)
        retired = retire(call, ctx)  # after the epochs: a retired pointer's epochs are archived by now
        trimmed = {step.family: step.trim(call, ctx, through) for step in steps if step.trim is not None}
        return CompactionReport(through, tuple(compacted), tuple(kept), deleted, pruned, tuple(outcomes["written"]),
                                tuple(outcomes["verified"]), retired, trimmed)

    return ctx.call(sweep, what=f"compact {ctx.pipeline!r}")


def _fold_first(call: Call, ctx: PipelineContext, steps: Sequence[CompactionStep]) -> None:
    """Let each family fold what it keeps of the epochs about to go (before ``compacted_through`` moves)."""
    for step in steps:
        if step.before is not None:
            step.before(call, ctx)


def _lowest_floor(call: Call, ctx: PipelineContext, steps: Sequence[CompactionStep]) -> int | None:
    """The lowest floor the families set (None: none sets one)."""
    floors = [floor for floor in (step.floor(call, ctx) for step in steps if step.floor is not None)
              if floor is not None]
    return min(floors) if floors else None


def _newest_lineage(call: Call, ctx: PipelineContext, epoch: int, generation: int,
                   lineage: dict[str, CompactedLineage]) -> dict[str, CompactedLineage]:
    """``lineage`` (the summary's) with the lineage vectors of ``epoch``'s seals, the newest compacted."""
    names = call.children(ctx.paths.seals(epoch, generation)) or []
    seal_paths = [ctx.paths.seal(epoch, generation, n) for n in names]
    for name, raw, path in zip(names, call.get_many(seal_paths), seal_paths, strict=True):
        if raw is not None:
            seal = SealNode.from_bytes(raw.data, path=path)
            if seal.upstream:
                lineage[name] = CompactedLineage(epoch, dict(seal.upstream))
    return lineage


def _newest_snapshots(call: Call, ctx: PipelineContext, record: PipelineRecord, old: int, new: int,
                     snapshots: dict[str, SnapshotPlace]) -> dict[str, SnapshotPlace]:
    """``snapshots`` (the summary's) with each partition's newest seal at or before ``new`` that left a
    snapshot, as compacting ``(old, new]`` finds it. Only partitions of the configurations in force there
    can have sealed there; each one's pointer names its two newest snapshots, so the epochs are walked
    (seals only) just for a partition whose pointer names none at or before ``new``."""
    names = sorted(partitions_of(call, ctx, versions_in_force(record, old, new)))
    paths = [ctx.paths.snapshot_pointer(name) for name in names]
    for name, path, raw in zip(names, paths, call.get_many(paths), strict=True):
        if raw is None:
            continue  # no snapshot since the partition began (or since it came back after a retirement)
        pointer = SnapshotPointerNode.from_bytes(raw.data, path=path)
        place = next((place for place in (pointer.current, pointer.previous)
                      if place is not None and place.epoch <= new), None)
        if place is None:
            place = newest_snapshot_place(call, ctx, name, new, old)
        known = snapshots.get(name)
        if place is not None and (known is None or place.epoch > known.epoch):
            snapshots[name] = place
    return snapshots


def delete_tree(call: Call, top: str, known: Sequence[str] | None = None) -> int:
    """Delete ``top`` and everything under it, deepest first, in batches; returns znodes deleted.

    :param known: the subtree's paths if the caller has just read them (the archive did): no listing.
    """
    order: list[str] = []
    if known is not None:
        order = sorted(known, key=lambda path: path.count("/"))
    pending = [] if known is not None else [top]
    while pending:
        level = pending
        pending = []
        order.extend(level)
        listings = [call.children(path) for path in level]
        for path, children in zip(level, listings, strict=True):
            pending.extend(child_path(path, child) for child in children or [])
    doomed = list(reversed(order))  # children before their parents (a late child: NotEmpty, walked below)
    deleted = 0
    for start in range(0, len(doomed), _DELETE_BATCH):
        batch = doomed[start:start + _DELETE_BATCH]
        if call.try_commit([Delete(path) for path in batch]) is None:
            deleted += len(batch)
            continue
        for path in batch:  # something moved (gone already, or a late child): one by one
            failure = call.try_commit([Delete(path)])
            if failure is None:
                deleted += 1
            elif isinstance(failure.error, NotEmptyError):
                deleted += delete_tree(call, path)
            elif not isinstance(failure.error, NoNodeError):
                raise failure.error
    return deleted


def _prune_history(call: Call, ctx: PipelineContext, zxid: int) -> int:
    """Delete history events committed at or before ``zxid`` (oldest first); returns how many."""
    pruned = 0
    seqs = event_sequences(call, ctx)
    for start in range(0, len(seqs), READ_BATCH):
        batch = seqs[start:start + READ_BATCH]
        stats = call.exists_many([ctx.paths.event(s) for s in batch])
        doomed = [ctx.paths.event(s) for s, stat in zip(batch, stats, strict=True)
                  if stat is not None and int(stat.czxid) <= zxid]
        if doomed and call.try_commit([Delete(path) for path in doomed]) is None:
            pruned += len(doomed)
        if len(doomed) < len(batch):
            break  # events are in commit order: the rest are newer
    return pruned


def _prune_requests(call: Call, ctx: PipelineContext, zxid: int) -> int:
    """Forget pipeline-level request ids older than ``zxid`` (a repeat that old is a new request)."""
    paths = [ctx.paths.request(name) for name in call.children(ctx.paths.requests) or []]
    doomed = [path for path, stat in zip(paths, call.exists_many(paths), strict=True)
              if stat is not None and int(stat.czxid) <= zxid]
    deleted = 0
    for start in range(0, len(doomed), _DELETE_BATCH):
        if call.try_commit([Delete(path) for path in doomed[start:start + _DELETE_BATCH]]) is None:
            deleted += len(doomed[start:start + _DELETE_BATCH])
    return deleted


def archived_lineage(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> dict[str, Any] | None:
    """The lineage vector kept for a compacted seal, if ``epoch`` is the newest compacted one of it (in the
    summary, or, for a partition removed from the configuration, in its newest retirement record)."""
    raw = call.get(ctx.paths.archive)
    if raw is None:
        return None
    summary = CompactionSummary.from_bytes(raw.data, path=ctx.paths.archive)
    if epoch > summary.through:
        return None  # not compacted: its seal answers, or nothing does
    item = summary.lineage.get(partition)
    if item is None:
        retired = newest_retired(call, ctx, partition)
        item = None if retired is None else retired.lineage
    if item is not None and item.epoch == epoch:
        return dict(item.upstream)
    return None
