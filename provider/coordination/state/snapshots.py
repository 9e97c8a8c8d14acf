"""Snapshot lookups: the newest snapshot pointers sealed for a partition before an epoch, through the
partition's snapshot pointer, the epochs ZooKeeper keeps, the compaction summary and (bounded by
``_ARCHIVE_WALK``) the archived epochs. Every function takes a
:class:`~airflow_epochs.coordination.base.call.Call`."""

from __future__ import annotations

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import (
    CorruptPayload,
    PipelineNotFound,
    SnapshotHistoryUnavailable,
    UnknownProducer,
)
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import decode_vote, epoch_record
from airflow_epochs.coordination.state.retired_partitions import newest_retired
from airflow_epochs.coordination.wire.compaction_record import CompactionSummary
from airflow_epochs.coordination.wire.nodes import (
    EpochNode,
    FrontierNode,
    SnapshotPlace,
    SnapshotPointerNode,
)
from airflow_epochs.coordination.wire.records import (
    SnapshotRef,
)
from airflow_epochs.coordination.wire.vote_records import SealNode

# Epochs read per request when walking back for a snapshot.
_WALK_BATCH = 50

# Compacted epochs (archive files, at most) one snapshot question walks back through.
_ARCHIVE_WALK = 64


def last_sealed_snapshots(
    call: Call, ctx: PipelineContext, partition: str, before_epoch: int | None = None
) -> dict[str, SnapshotRef]:
    """Producer -> the newest snapshot pointer sealed for ``partition`` before ``before_epoch``.

    Bounded cost: the frontier and the partition's snapshot pointer (one pipelined read), then the
    seal and the votes that carry the snapshots. The pointer keeps the two newest seals that left
    snapshots, so a retry of the open epoch (the common question) never walks back.
    """
    frontier_raw, pointer_raw = call.get_many([ctx.paths.frontier, ctx.paths.snapshot_pointer(partition)])
    if frontier_raw is None:
        raise PipelineNotFound(f"pipeline {ctx.pipeline!r} does not exist under {ctx.paths.root}")
    limit = FrontierNode.from_bytes(frontier_raw.data, path=ctx.paths.frontier).epoch
    if before_epoch is not None:
        limit = min(limit, before_epoch - 1)
    if pointer_raw is None:  # never left a snapshot, or removed from the configuration and retired
        retired = newest_retired(call, ctx, partition)
        if retired is None or retired.pointer is None:
            return {}
        named = _snapshots_named(call, ctx, retired.pointer, limit)
        return named if named is not None else _older_snapshots(call, ctx, partition, limit, before_epoch)
    pointer = SnapshotPointerNode.from_bytes(pointer_raw.data, path=ctx.paths.snapshot_pointer(partition))
    named = _snapshots_named(call, ctx, pointer, limit)
    if named is not None:
        return named
    # Older than both pointers (rare: a reader asking about the past, or a rollback resetting the pointer).
    return _older_snapshots(call, ctx, partition, limit, before_epoch)


def _older_snapshots(call: Call, ctx: PipelineContext, partition: str, limit: int,
                     before_epoch: int | None) -> dict[str, SnapshotRef]:
    """The snapshots of the newest seal of ``partition`` at or before ``limit`` that left one, when no
    pointer names it: the epochs ZooKeeper keeps, newest first; then the compacted ones: the summary's
    newest compacted snapshot if it is at or before ``limit``, else a walk back through the archived
    epochs (at most :data:`_ARCHIVE_WALK` of them). ``{}`` only when that settles that there is none;
    :class:`SnapshotHistoryUnavailable` when the history that would say is compacted (without an
    archive) or further back than the walk."""
    record = ctx.record(call)
    for epoch in range(limit, record.compacted_through, -1):
        found = epoch_record(call, ctx, epoch)
        if found is None or found.record.state != "sealed":
            continue
        refs = _snapshots_at(call, ctx, partition, epoch, found.record.generation)
        if refs:
            return refs
    top = min(limit, record.compacted_through)
    if top < record.first_epoch:
        return {}  # every epoch before the question was read, or there is none
    retired = newest_retired(call, ctx, partition)
    summary_raw = call.get(ctx.paths.archive)
    summary = None if summary_raw is None else CompactionSummary.from_bytes(summary_raw.data, path=ctx.paths.archive)
    place = None if summary is None else summary.snapshots.get(partition)
    if place is not None and place.epoch <= top:  # the newest compacted snapshot is older than the question
        refs = _snapshots_at(call, ctx, partition, place.epoch, place.generation)
        if refs:
            return refs
    elif place is None and summary is not None and summary.snapshots_from < record.first_epoch \
            and retired is None:
        return {}  # every compacted seal is recorded there, and none of this partition left a snapshot
    end = _walk_compacted(call, ctx, partition, top, record.first_epoch)
    if isinstance(end, dict):
        return end
    if end < record.first_epoch:
        return {}  # the walk read every epoch before the question
    # a retired pointer names the partition's newest snapshots up to its retirement
    if retired is not None and retired.pointer is not None and end <= retired.retired_through:
        named = _snapshots_named(call, ctx, retired.pointer, limit)
        if named is not None:
            return named
    asked = limit + 1 if before_epoch is None else before_epoch
    why = (f"the walk back reads at most {_ARCHIVE_WALK} compacted epochs" if end == top - _ARCHIVE_WALK
           else "they were compacted without an archive")
    raise SnapshotHistoryUnavailable(
        f"pipeline {ctx.pipeline!r}: whether partition {partition!r} sealed a snapshot before epoch {asked} is "
        f"not known: no snapshot of it in epochs {end + 1}..{asked - 1}, and epochs {record.first_epoch}..{end} "
        f"cannot be read ({why}); the readable history ends at epoch {end + 1}",
        partition=partition, before_epoch=asked, history_ends=end)


def _walk_compacted(call: Call, ctx: PipelineContext, partition: str, top: int,
                    first: int) -> dict[str, SnapshotRef] | int:
    """The snapshots of the newest compacted epoch at or before ``top`` whose seal of ``partition`` left
    some, read where each epoch is (ZooKeeper if kept in full, else its archive file); or, when none is
    found, the newest epoch the walk could not read (``first - 1``: it read every one)."""
    for epoch in range(top, max(first - 1, top - _ARCHIVE_WALK), -1):
        source: Call | None = call
        found = epoch_record(call, ctx, epoch)
        if found is None:
            source = archived_call(call, ctx, epoch)
            found = None if source is None else epoch_record(source, ctx, epoch)
        if source is None or found is None:
            return epoch  # compacted without an archive (or its file is gone): the history ends here
        if found.record.state == "sealed":
            refs = _snapshots_at(source, ctx, partition, epoch, found.record.generation)
            if refs:
                return refs
    return max(first - 1, top - _ARCHIVE_WALK)


def _snapshots_named(
    call: Call, ctx: PipelineContext, pointer: SnapshotPointerNode, limit: int
) -> dict[str, SnapshotRef] | None:
    """The snapshots of the newest seal ``pointer`` names at or before ``limit`` (None: it names none)."""
    for candidate in (pointer.current, pointer.previous):
        if candidate is not None and candidate.epoch <= limit:
            return _snapshots_at(call, ctx, pointer.partition, candidate.epoch, candidate.generation)
    return None


def compacted_snapshot(call: Call, ctx: PipelineContext, partition: str) -> tuple[SnapshotPlace | None, bool]:
    """The newest compacted seal of ``partition`` that left a snapshot, as the compaction summary records
    it (kept in full in ZooKeeper without an archive, read from the archive with one), and whether that
    answer is known: False when epochs were compacted by a version that did not record it and the summary
    names none (a partition retired since is answered by its retirement record, not here)."""
    record = ctx.record(call)
    if record.compacted_through < record.first_epoch:
        return None, True
    raw = call.get(ctx.paths.archive)
    if raw is None:
        return None, False
    summary = CompactionSummary.from_bytes(raw.data, path=ctx.paths.archive)
    place = summary.snapshots.get(partition)
    return place, place is not None or summary.snapshots_from < record.first_epoch


def newest_snapshot_place(call: Call, ctx: PipelineContext, partition: str, through: int,
                          after: int) -> SnapshotPlace | None:
    """The newest sealed epoch in ``(after, through]`` still in ZooKeeper whose seal of ``partition`` left
    a snapshot, or None. Epochs newest first, in batches: each epoch record, then each seal (one read
    each, no votes)."""
    top = through
    while top > after:
        epochs = list(range(top, max(after, top - _WALK_BATCH), -1))
        top = epochs[-1] - 1
        found = [(epoch, EpochNode.from_bytes(raw.data, path=ctx.paths.epoch(epoch)))
                 for epoch, raw in zip(epochs, call.get_many([ctx.paths.epoch(e) for e in epochs]), strict=True)
                 if raw is not None]
        sealed = [(epoch, node) for epoch, node in found if node.state == "sealed"]
        paths = [ctx.paths.seal(epoch, node.generation, partition) for epoch, node in sealed]
        for (epoch, node), path, raw in zip(sealed, paths, call.get_many(paths), strict=True):
            seal = None if raw is None else SealNode.from_bytes(raw.data, path=path)
            if seal is not None and seal.snapshot_producers:
                return SnapshotPlace(epoch, node.generation, seal.attempt)
    return None


def _snapshots_at(
    call: Call, ctx: PipelineContext, partition: str, epoch: int, generation: int
) -> dict[str, SnapshotRef]:
    """The snapshot pointers sealed with ``partition`` at ``epoch`` (one opening), by producer."""
    seal_path = ctx.paths.seal(epoch, generation, partition)
    raw = call.get(seal_path)
    if raw is None:  # compacted with an archive (even while a snapshot pointer names it): read it there
        past = archived_call(call, ctx, epoch) if epoch_record(call, ctx, epoch) is None else None
        return {} if past is None else _snapshots_at(past, ctx, partition, epoch, generation)
    seal = SealNode.from_bytes(raw.data, path=seal_path)
    if not seal.snapshot_producers:
        return {}
    token = seal.attempt
    producers = ctx.config(call, seal.config_version).config.partitions.get(partition, ())
    if seal.votes is not None:
        return {name: SnapshotRef(epoch, partition, name, vote.snapshot)
                for name, vote in seal.votes.votes.items() if vote.snapshot is not None}
    names = [producers[i] for i in seal.snapshot_producers if 0 <= i < len(producers)]
    votes = call.get_many([ctx.paths.vote(epoch, token, partition, name) for name in names])
    refs: dict[str, SnapshotRef] = {}
    for name, vote_raw in zip(names, votes, strict=True):
        if vote_raw is None:
            raise CorruptPayload(f"{seal_path}: the vote of {name!r}, which carries a snapshot, is missing")
        vote = decode_vote(vote_raw, epoch, token, partition, name, ctx.paths.vote(epoch, token, partition, name))
        refs[name] = SnapshotRef(epoch, partition, name, vote.snapshot)
    return refs


def pick_snapshot(refs: dict[str, SnapshotRef], partition: str, producer: str | None) -> SnapshotRef | None:
    """One snapshot out of ``refs``: the named producer's, or the only one."""
    if producer is not None:
        return refs.get(producer)
    if len(refs) > 1:
        raise UnknownProducer(
            f"partition {partition!r} at epoch {next(iter(refs.values())).epoch} has snapshots from "
            f"{sorted(refs)}; name the producer"
        )
    return next(iter(refs.values()), None)
