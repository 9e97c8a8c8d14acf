"""Read-only access to a pipeline's state, with optional watches: what status pages, sensors,
triggers and the UI read, and what the writers decide on.

The functions take a :class:`~airflow_epochs.coordination.base.session.Call` (so they run inside one
deadline, and compose into a writer's decision); :class:`PipelineReader` wraps each in its own call.
Every read is bounded: none walks the epochs behind the frontier, except the rare snapshot lookup
that asks for an epoch older than the two newest snapshots (bounded by retention, and by
``_ARCHIVE_WALK`` archived epochs).

A compacted epoch whose record was archived (:mod:`.archive`) is read from its archive file through
an :class:`~airflow_epochs.coordination.state.archive.ArchivedCall`: the same functions run on the same
bytes, so the answers are exactly those given before the epoch left ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_epochs.coordination.base.errors import (
    CorruptPayload,
    PipelineNotFound,
    SnapshotHistoryUnavailable,
    UnknownProducer,
)
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.session import Call
from airflow_epochs.coordination.state.archive import archived_call, archived_events
from airflow_epochs.coordination.state.history import event_sequences, latest_event, read_events
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.retired_partitions import newest_retired
from airflow_epochs.coordination.wire.compaction_record import CompactionSummary
from airflow_epochs.coordination.wire.nodes import (
    AttemptNode,
    ConsumerNode,
    EpochNode,
    EventNode,
    FrontierNode,
    SnapshotPlace,
    SnapshotPointerNode,
)
from airflow_epochs.coordination.wire.records import (
    EpochInfo,
    Event,
    Overtaken,
    SealInfo,
    SealRecord,
    SnapshotRef,
    VoteRecord,
)
from airflow_epochs.coordination.wire.vote_records import CastVote, SealNode, folded_vote

Watch = Callable[[Any], Any]

# Epochs read per request when walking back for a snapshot.
_WALK_BATCH = 50

# Compacted epochs (archive files, at most) one snapshot question walks back through.
_ARCHIVE_WALK = 64


# -- single records ----------------------------------------------------------------------------


def frontier(call: Call, ctx: PipelineContext, watch: Watch | None = None) -> int:
    raw = call.get(ctx.paths.frontier, watch=watch)
    if raw is None:
        raise PipelineNotFound(f"pipeline {ctx.pipeline!r} does not exist under {ctx.paths.root}")
    return FrontierNode.from_bytes(raw[0], path=ctx.paths.frontier).epoch


def frontier_with_stat(call: Call, ctx: PipelineContext) -> tuple[int, Any]:
    """The frontier and its znode stat (for a version-checked change of it)."""
    raw = call.get(ctx.paths.frontier)
    if raw is None:
        raise PipelineNotFound(f"pipeline {ctx.pipeline!r} does not exist under {ctx.paths.root}")
    return FrontierNode.from_bytes(raw[0], path=ctx.paths.frontier).epoch, raw[1]


def epoch_record(
    call: Call, ctx: PipelineContext, epoch: int, watch: Watch | None = None
) -> tuple[EpochNode, Any] | None:
    """The epoch record and its stat, or None if the epoch was never opened (or is compacted)."""
    path = ctx.paths.epoch(epoch)
    raw = call.get(path, watch=watch)
    return None if raw is None else (EpochNode.from_bytes(raw[0], path=path), raw[1])


def attempt_record(call: Call, ctx: PipelineContext, epoch: int, token: int) -> tuple[AttemptNode, Any] | None:
    path = ctx.paths.attempt(epoch, token)
    raw = call.get(path)
    return None if raw is None else (AttemptNode.from_bytes(raw[0], path=path), raw[1])


def attempt_overtaken(
    token: int, generation: int, epoch_node: EpochNode, attempt_node: AttemptNode | None
) -> Overtaken | None:
    """What happened to attempt ``token`` (of opening ``generation``) since it was opened, as an
    :class:`Overtaken`; None while it is the epoch's running attempt."""
    now = epoch_node.attempt
    state = attempt_node.state if attempt_node else "running"
    if state == "rolled_back" or epoch_node.state == "rolled_back" or generation != epoch_node.generation:
        return Overtaken("rolled_back", None if epoch_node.state == "rolled_back" else now)
    if state == "aborted":
        return Overtaken("aborted", now)
    if epoch_node.state == "sealed":
        return Overtaken("sealed", now) if now == token else Overtaken("superseded", now)
    if state != "running" or now != token:
        return Overtaken("superseded", now)
    return None


def sealed_partitions(call: Call, ctx: PipelineContext, epoch: int, generation: int) -> list[str]:
    """The partitions sealed in one opening of the epoch (names only)."""
    return sorted(call.children(ctx.paths.seals(epoch, generation)) or [])


def attempt_state(epoch_node: EpochNode, attempt_node: AttemptNode | None) -> str:
    """``running``, ``aborted``, ``superseded``, ``sealed`` or ``rolled_back``, as a reader sees it."""
    if epoch_node.state in ("sealed", "rolled_back"):
        return epoch_node.state
    return attempt_node.state if attempt_node is not None else "running"


def epoch_info(call: Call, ctx: PipelineContext, epoch: int, watch: Watch | None = None) -> EpochInfo | None:
    """The recorded state of ``epoch``; a compacted epoch reads as sealed (attempt state ``compacted``)."""
    found = epoch_record(call, ctx, epoch, watch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        if past is not None:
            return epoch_info(past, ctx, epoch)
        record = ctx.record(call)
        if record.first_epoch <= epoch <= record.compacted_through:
            return EpochInfo(epoch, "sealed", 0, "compacted", "", -1, 0, (), ())
        return None
    node, _ = found
    config = ctx.config(call, node.config_version).config
    partitions = tuple(sorted(config.partitions))
    attempt_node: AttemptNode | None = None
    sealed: tuple[str, ...] = ()
    if node.state == "sealed":
        sealed = partitions  # sealed means every partition is: nothing more to read
    elif node.state == "open":
        found_attempt = attempt_record(call, ctx, epoch, node.attempt)
        attempt_node = found_attempt[0] if found_attempt else None
        sealed = tuple(sealed_partitions(call, ctx, epoch, node.generation))
    return EpochInfo(
        epoch=epoch, state=node.state, attempt=node.attempt,
        attempt_state=attempt_state(node, attempt_node), owner=node.owner,
        config_version=node.config_version, generation=node.generation,
        sealed_partitions=sealed, partitions=partitions,
        opened_at=node.opened_at, sealed_at=node.sealed_at,
    )


def seal_record(
    call: Call, ctx: PipelineContext, epoch: int, partition: str, watch: Watch | None = None
) -> SealRecord | None:
    """The seal of ``partition`` at ``epoch`` in the epoch's current opening, or None.

    With ``watch``, one-shot watches stay on the epoch record and (if it exists) on the seal node,
    so the caller hears of the seal, or of a rollback that starts a new opening.
    """
    found = epoch_record(call, ctx, epoch, watch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        return None if past is None else seal_record(past, ctx, epoch, partition)
    if found[0].state == "rolled_back":
        return None
    generation = found[0].generation
    path = ctx.paths.seal(epoch, generation, partition)
    raw = call.get(path, watch=watch)
    return None if raw is None else decode_seal(raw, epoch, partition, path)


def decode_seal(raw: tuple[bytes, Any], epoch: int, partition: str, path: str) -> SealRecord:
    seal = SealNode.from_bytes(raw[0], path=path)
    return SealRecord(epoch, partition, seal.attempt, seal.generation, seal.sealed_at, int(raw[1].czxid),
                      seal.request, seal.producers, dict(seal.upstream))


def decode_vote(raw: tuple[bytes, Any], epoch: int, token: int, partition: str, producer: str,
                path: str) -> VoteRecord:
    return CastVote.from_znode(raw[0], path, producer, token).record(epoch, partition)


def seal_info(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> SealInfo | None:
    """The full seal: every producer's manifest, the snapshots and the lineage vector."""
    found = epoch_record(call, ctx, epoch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        return None if past is None else seal_info(past, ctx, epoch, partition)
    if found[0].state == "rolled_back":
        return None
    generation = found[0].generation
    seal_path = ctx.paths.seal(epoch, generation, partition)
    raw = call.get(seal_path)
    if raw is None:
        return None
    seal = SealNode.from_bytes(raw[0], path=seal_path)
    token = seal.attempt
    manifests: dict[str, Any] = {}
    snapshots: dict[str, Any] = {}
    folded = seal.votes
    if folded is not None:
        producers = folded.names()
        records = [folded.votes[name].record(epoch, partition) for name in producers]
    else:
        producers = producer_names(call, ctx, epoch, token, partition, seal_path)
        records = []
        for name, vote_raw in zip(producers, call.get_many(
                [ctx.paths.vote(epoch, token, partition, name) for name in producers]), strict=True):
            if vote_raw is None:
                raise CorruptPayload(f"{seal_path}: the vote of {name!r} is missing")
            path = ctx.paths.vote(epoch, token, partition, name)
            records.append(decode_vote(vote_raw, epoch, token, partition, name, path))
    for vote in records:
        manifests[vote.producer] = vote.manifest
        if vote.snapshot is not None:
            snapshots[vote.producer] = vote.snapshot
    return SealInfo(
        epoch=epoch, partition=partition, attempt=token, generation=generation, producers=tuple(producers),
        manifests=manifests, snapshots=snapshots, sealed_at=seal.sealed_at, zxid=int(raw[1].czxid),
        upstream=dict(seal.upstream),
    )


def producer_names(call: Call, ctx: PipelineContext, epoch: int, token: int, partition: str, where: str) -> list[str]:
    """The producers whose votes sealed ``partition`` under attempt ``token``: the vote nodes present."""
    names = call.children(ctx.paths.vote_counter(epoch, token, partition))
    if names is None:
        raise CorruptPayload(f"{where}: the votes of attempt {token} are missing")
    return sorted(names)


def vote_of(
    call: Call, ctx: PipelineContext, epoch: int, partition: str, producer: str, attempt: int | None = None
) -> VoteRecord | None:
    """The vote ``producer`` cast on ``partition`` under the epoch's current attempt (or under
    ``attempt``, e.g. a superseded one), or None."""
    found = epoch_record(call, ctx, epoch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        return None if past is None else vote_of(past, ctx, epoch, partition, producer, attempt)
    if found[0].state == "rolled_back" and attempt is None:
        return None
    token = found[0].attempt if attempt is None else attempt
    path = ctx.paths.vote(epoch, token, partition, producer)
    raw = call.get(path)
    if raw is not None:
        return decode_vote(raw, epoch, token, partition, producer, path)
    # a sole producer's vote lives in the seal, and several producers' votes fold into it
    seal_path = ctx.paths.seal(epoch, found[0].generation, partition)
    vote = folded_vote(call.get(seal_path), producer, seal_path)
    return vote.record(epoch, partition) if vote is not None and vote.attempt == token else None


# -- snapshots ---------------------------------------------------------------------------------


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
    limit = FrontierNode.from_bytes(frontier_raw[0], path=ctx.paths.frontier).epoch
    if before_epoch is not None:
        limit = min(limit, before_epoch - 1)
    if pointer_raw is None:  # never left a snapshot, or removed from the configuration and retired
        retired = newest_retired(call, ctx, partition)
        if retired is None or retired.pointer is None:
            return {}
        named = _snapshots_named(call, ctx, retired.pointer, limit)
        return named if named is not None else _older_snapshots(call, ctx, partition, limit, before_epoch)
    pointer = SnapshotPointerNode.from_bytes(pointer_raw[0], path=ctx.paths.snapshot_pointer(partition))
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
        if found is None or found[0].state != "sealed":
            continue
        refs = snapshots_at(call, ctx, partition, epoch, found[0].generation)
        if refs:
            return refs
    top = min(limit, record.compacted_through)
    if top < record.first_epoch:
        return {}  # every epoch before the question was read, or there is none
    retired = newest_retired(call, ctx, partition)
    summary_raw = call.get(ctx.paths.archive)
    summary = None if summary_raw is None else CompactionSummary.from_bytes(summary_raw[0], path=ctx.paths.archive)
    place = None if summary is None else summary.snapshots.get(partition)
    if place is not None and place.epoch <= top:  # the newest compacted snapshot is older than the question
        refs = snapshots_at(call, ctx, partition, place.epoch, place.generation)
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
        if found[0].state == "sealed":
            refs = snapshots_at(source, ctx, partition, epoch, found[0].generation)
            if refs:
                return refs
    return max(first - 1, top - _ARCHIVE_WALK)


def _snapshots_named(
    call: Call, ctx: PipelineContext, pointer: SnapshotPointerNode, limit: int
) -> dict[str, SnapshotRef] | None:
    """The snapshots of the newest seal ``pointer`` names at or before ``limit`` (None: it names none)."""
    for candidate in (pointer.current, pointer.previous):
        if candidate is not None and candidate.epoch <= limit:
            return snapshots_at(call, ctx, pointer.partition, candidate.epoch, candidate.generation)
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
    summary = CompactionSummary.from_bytes(raw[0], path=ctx.paths.archive)
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
        found = [(epoch, EpochNode.from_bytes(raw[0], path=ctx.paths.epoch(epoch)))
                 for epoch, raw in zip(epochs, call.get_many([ctx.paths.epoch(e) for e in epochs]), strict=True)
                 if raw is not None]
        sealed = [(epoch, node) for epoch, node in found if node.state == "sealed"]
        paths = [ctx.paths.seal(epoch, node.generation, partition) for epoch, node in sealed]
        for (epoch, node), path, raw in zip(sealed, paths, call.get_many(paths), strict=True):
            seal = None if raw is None else SealNode.from_bytes(raw[0], path=path)
            if seal is not None and seal.snapshot_producers:
                return SnapshotPlace(epoch, node.generation, seal.attempt)
    return None


def snapshots_at(
    call: Call, ctx: PipelineContext, partition: str, epoch: int, generation: int
) -> dict[str, SnapshotRef]:
    """The snapshot pointers sealed with ``partition`` at ``epoch`` (one opening), by producer."""
    seal_path = ctx.paths.seal(epoch, generation, partition)
    raw = call.get(seal_path)
    if raw is None:  # compacted with an archive (even while a snapshot pointer names it): read it there
        past = archived_call(call, ctx, epoch) if epoch_record(call, ctx, epoch) is None else None
        return {} if past is None else snapshots_at(past, ctx, partition, epoch, generation)
    seal = SealNode.from_bytes(raw[0], path=seal_path)
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


# -- consumers ---------------------------------------------------------------------------------


def consumer_acks(call: Call, ctx: PipelineContext, watch: Watch | None = None) -> dict[str, tuple[int, int]]:
    """The registered consumers -> (acknowledged epoch, znode version).

    With ``watch`` (a kazoo watcher), one-shot watches are left on the folder and on each consumer,
    so the caller hears of a consumer joining, leaving or acknowledging.
    """
    names = call.children(ctx.paths.consumers, watch=watch) or []
    out: dict[str, tuple[int, int]] = {}
    for name in names:
        path = ctx.paths.consumer(name)
        raw = call.get(path, watch=watch)
        if raw is None:  # left meanwhile: the folder's watch covers it
            continue
        out[name] = (ConsumerNode.from_bytes(raw[0], path=path).acked, raw[1].version)
    return out


# -- history -----------------------------------------------------------------------------------


def history(call: Call, ctx: PipelineContext, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
    """The events after ``since_seq``, oldest first: those retention moved to the archive, then those
    still in ZooKeeper (the archive is read only when the cursor is older than every kept event)."""
    live = read_events(call, ctx.paths, since_seq=since_seq, limit=limit)
    record = ctx.record(call)
    if record.compacted_through < record.first_epoch:
        return live
    kept = [e.seq for e in live] or event_sequences(call, ctx.paths)
    oldest_kept = min(kept, default=None)
    # archived events are the pruned ones, all older than every kept event
    if oldest_kept is not None and since_seq >= oldest_kept - 1:
        return live
    past: list[Event] = []
    for seq, raw, stat in archived_events(call, ctx, since_seq):
        if oldest_kept is not None and seq >= oldest_kept:
            break
        node = EventNode.from_bytes(raw, path=ctx.paths.event(seq))
        past.append(Event(seq, int(stat.czxid), node.event, node.at, node.detail))
    merged = past + [e for e in live if not past or e.seq > past[-1].seq]
    return merged if limit is None else merged[:limit]


# -- the reader --------------------------------------------------------------------------------


class PipelineReader:
    """Read-only view of one pipeline; every method is one call with its own deadline.

    :param ctx: the pipeline (its client, paths and deadline).
    """

    def __init__(self, ctx: PipelineContext) -> None:
        self.ctx = ctx

    def frontier(self) -> int:
        """The highest epoch such that it and every earlier epoch are sealed."""
        return self.ctx.call(lambda c: frontier(c, self.ctx), what="read frontier")

    def newest_epoch(self) -> int:
        """The newest epoch opened (and not rolled back); ``first_epoch - 1`` if none."""
        return self.ctx.call(lambda c: self.ctx.record(c).newest_epoch, what="read pipeline")

    def epoch_info(self, epoch: int) -> EpochInfo | None:
        validate_epoch(epoch)
        return self.ctx.call(lambda c: epoch_info(c, self.ctx, epoch), what=f"read epoch {epoch}")

    def seal(self, epoch: int, partition: str) -> SealInfo | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda c: seal_info(c, self.ctx, epoch, partition),
                             what=f"read seal {partition!r} of epoch {epoch}")

    def seal_record(self, epoch: int, partition: str) -> SealRecord | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda c: seal_record(c, self.ctx, epoch, partition),
                             what=f"read seal {partition!r} of epoch {epoch}")

    def vote_of(self, epoch: int, partition: str, producer: str, attempt: int | None = None) -> VoteRecord | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        validate_name("producer", producer)
        return self.ctx.call(lambda c: vote_of(c, self.ctx, epoch, partition, producer, attempt),
                             what=f"read the vote of {producer!r} on {partition!r} at epoch {epoch}")

    def last_sealed_snapshots(self, partition: str, *, before_epoch: int | None = None) -> dict[str, SnapshotRef]:
        validate_name("partition", partition)
        if before_epoch is not None:
            validate_epoch(before_epoch, what="before_epoch")
        return self.ctx.call(lambda c: last_sealed_snapshots(c, self.ctx, partition, before_epoch),
                             what=f"find the last snapshots of {partition!r}")

    def history(self, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
        return self.ctx.call(lambda c: history(c, self.ctx, since_seq=since_seq, limit=limit), what="read history")

    def latest_event(self) -> Event | None:
        return self.ctx.call(lambda c: latest_event(c, self.ctx.paths), what="read the latest event")

    def consumers(self) -> dict[str, int]:
        acks = self.ctx.call(lambda c: consumer_acks(c, self.ctx), what="read consumers")
        return {name: acked for name, (acked, _) in acks.items()}
