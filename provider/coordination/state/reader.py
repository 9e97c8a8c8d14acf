"""Read-only access to a pipeline's state, with optional watches: what status pages, sensors,
triggers and the UI read, and what the writers decide on.

The functions take a :class:`~airflow_epochs.coordination.base.call.Call` (so they run inside one
deadline, and compose into a writer's decision).
Every read is bounded: none walks the epochs behind the frontier (the snapshot lookups, which may,
bounded, are in :mod:`.snapshots`); :class:`~.pipeline_reader.PipelineReader` runs each in a call of
its own.

A compacted epoch whose record was archived (:mod:`.archive`) is read from its archive file through
an :class:`~airflow_epochs.coordination.state.archive.ArchivedCall`: the same functions run on the same
bytes, so the answers are exactly those given before the epoch left ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import (
    CorruptPayload,
    PipelineNotFound,
)
from airflow_epochs.coordination.base.znode import Found, Znode
from airflow_epochs.coordination.state.archive import archived_call, archived_events
from airflow_epochs.coordination.state.history import event_sequences, read_events
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.nodes import (
    AttemptNode,
    ConsumerNode,
    EpochNode,
    EventNode,
    FrontierNode,
)
from airflow_epochs.coordination.wire.records import (
    EpochInfo,
    Event,
    Overtaken,
    SealInfo,
    SealRecord,
    VoteRecord,
)
from airflow_epochs.coordination.wire.vote_records import CastVote, SealNode, folded_vote

Watch = Callable[[Any], Any]


# -- single records ----------------------------------------------------------------------------


def frontier(call: Call, ctx: PipelineContext, watch: Watch | None = None) -> int:
    raw = call.get(ctx.paths.frontier, watch=watch)
    if raw is None:
        raise PipelineNotFound(f"pipeline {ctx.pipeline!r} does not exist under {ctx.paths.root}")
    return FrontierNode.from_bytes(raw.data, path=ctx.paths.frontier).epoch


def frontier_with_stat(call: Call, ctx: PipelineContext) -> Found[int]:
    """The frontier (the record) and its znode stat (for a version-checked change of it)."""
    raw = call.get(ctx.paths.frontier)
    if raw is None:
        raise PipelineNotFound(f"pipeline {ctx.pipeline!r} does not exist under {ctx.paths.root}")
    return Found(FrontierNode.from_bytes(raw.data, path=ctx.paths.frontier).epoch, raw.stat)


def epoch_record(
    call: Call, ctx: PipelineContext, epoch: int, watch: Watch | None = None
) -> Found[EpochNode] | None:
    """The epoch record and its stat, or None if the epoch was never opened (or is compacted)."""
    path = ctx.paths.epoch(epoch)
    raw = call.get(path, watch=watch)
    return None if raw is None else Found(EpochNode.from_bytes(raw.data, path=path), raw.stat)


def attempt_record(call: Call, ctx: PipelineContext, epoch: int, token: int) -> Found[AttemptNode] | None:
    path = ctx.paths.attempt(epoch, token)
    raw = call.get(path)
    return None if raw is None else Found(AttemptNode.from_bytes(raw.data, path=path), raw.stat)


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
    return info_of_record(call, ctx, epoch, found.record)


def info_of_record(call: Call, ctx: PipelineContext, epoch: int, node: EpochNode) -> EpochInfo:
    """The :class:`EpochInfo` of ``epoch`` from its record ``node`` as already read (a sealed epoch
    needs nothing more; an open one, its attempt and seals): an answer from one read of the record."""
    config = ctx.config(call, node.config_version).config
    partitions = tuple(sorted(config.partitions))
    attempt_node: AttemptNode | None = None
    sealed: tuple[str, ...] = ()
    if node.state == "sealed":
        sealed = partitions  # sealed means every partition is: nothing more to read
    elif node.state == "open":
        found_attempt = attempt_record(call, ctx, epoch, node.attempt)
        attempt_node = found_attempt.record if found_attempt else None
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
    sealed = current_seal(call, ctx, epoch, partition, watch)
    return None if sealed is None else decode_seal(sealed.node, epoch, partition, sealed.path)


class CurrentSeal(NamedTuple):
    """The seal node of a partition in its epoch's current opening, where it was read, and the call that
    read it (an archive's, for a compacted epoch: further reads of that epoch go through it)."""

    call: Call
    generation: int
    path: str
    node: Znode


def current_seal(
    call: Call, ctx: PipelineContext, epoch: int, partition: str, watch: Watch | None = None
) -> CurrentSeal | None:
    """The seal of ``partition`` in ``epoch``'s current opening (from its archive once compacted), or None:
    not sealed, rolled back, or compacted without an archive. ``watch`` as :func:`seal_record` says."""
    found = epoch_record(call, ctx, epoch, watch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        return None if past is None else current_seal(past, ctx, epoch, partition)
    if found.record.state == "rolled_back":
        return None
    generation = found.record.generation
    path = ctx.paths.seal(epoch, generation, partition)
    raw = call.get(path, watch=watch)
    return None if raw is None else CurrentSeal(call, generation, path, raw)


def decode_seal(raw: Znode, epoch: int, partition: str, path: str) -> SealRecord:
    seal = SealNode.from_bytes(raw.data, path=path)
    return SealRecord(epoch, partition, seal.attempt, seal.generation, seal.sealed_at, int(raw.stat.czxid),
                      seal.request, seal.producer_count, dict(seal.upstream), dict(seal.read_versions))


def decode_vote(raw: Znode, epoch: int, token: int, partition: str, producer: str,
                path: str) -> VoteRecord:
    return CastVote.from_znode(raw.data, path, producer, token).record(epoch, partition)


def seal_info(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> SealInfo | None:
    """The full seal: every producer's manifest, the snapshots and the lineage vector."""
    sealed = current_seal(call, ctx, epoch, partition)
    if sealed is None:
        return None
    call, generation, seal_path, raw = sealed  # a compacted epoch's votes are read from its archive too
    seal = SealNode.from_bytes(raw.data, path=seal_path)
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
        manifests=manifests, snapshots=snapshots, sealed_at=seal.sealed_at, zxid=int(raw.stat.czxid),
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
    if found.record.state == "rolled_back" and attempt is None:
        return None
    token = found.record.attempt if attempt is None else attempt
    path = ctx.paths.vote(epoch, token, partition, producer)
    raw = call.get(path)
    if raw is not None:
        return decode_vote(raw, epoch, token, partition, producer, path)
    # a sole producer's vote lives in the seal, and several producers' votes fold into it
    seal_path = ctx.paths.seal(epoch, found.record.generation, partition)
    vote = folded_vote(call.get(seal_path), producer, seal_path)
    return vote.record(epoch, partition) if vote is not None and vote.attempt == token else None


# -- snapshots ---------------------------------------------------------------------------------


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
        out[name] = (ConsumerNode.from_bytes(raw.data, path=path).acked, raw.stat.version)
    return out


# -- history -----------------------------------------------------------------------------------


def history(call: Call, ctx: PipelineContext, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
    """The events after ``since_seq``, oldest first: those retention moved to the archive, then those
    still in ZooKeeper (the archive is read only when the cursor is older than every kept event)."""
    live = read_events(call, ctx, since_seq=since_seq, limit=limit)
    record = ctx.record(call)
    if record.compacted_through < record.first_epoch:
        return live
    kept = [e.seq for e in live] or event_sequences(call, ctx)
    oldest_kept = min(kept, default=None)
    # archived events are the pruned ones, all older than every kept event
    if oldest_kept is not None and since_seq >= oldest_kept - 1:
        return live
    past: list[Event] = []
    for seq, raw in archived_events(call, ctx, since_seq):
        if oldest_kept is not None and seq >= oldest_kept:
            break
        node = EventNode.from_bytes(raw.data, path=ctx.paths.event(seq))
        past.append(Event(seq, int(raw.stat.czxid), node.event, node.at, node.detail))
    merged = past + [e for e in live if not past or e.seq > past[-1].seq]
    return merged if limit is None else merged[:limit]


# -- the reader --------------------------------------------------------------------------------


