"""Seals: a partition seals when every producer registered for it has voted under the current
attempt; the epoch seals (and the frontier moves) when its last partition seals.

No shared tally is read or compare-and-set. Each vote bumps its partition's vote counter with an
unconditional ``set`` inside its own transaction; the counter's new version tells the voter how many
votes are in, so exactly one voter learns that it completed the set, and that voter writes the seal.
Each seal bumps the epoch's seal counter the same way, so exactly one sealer learns that it completed
the epoch. Every seal transaction checks the attempt node's version (fencing: a superseded, aborted
or rolled-back attempt writes nothing) and creates its seal create-only (a seal is written once).
If the completing voter dies between its vote and its seal, the next vote repeat or the epoch's
close finds every vote in and writes the seal: sealing is finished by whoever looks next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import TRANSIENT_ERRORS, Call
from airflow_epochs.coordination.base.errors import (
    AttemptSuperseded,
    EpochAlreadySealed,
    EpochNotOpen,
    PayloadTooLarge,
    UnknownPartition,
    UnknownProducer,
)
from airflow_epochs.coordination.base.steps import Check, Create, Delete, SetData, Step, first_failure
from airflow_epochs.coordination.base.znode import Znode
from airflow_epochs.coordination.state.history import commit
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import (
    attempt_record,
    epoch_record,
)
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.coordination.wire.events import EpochSealed, PartitionSealed
from airflow_epochs.coordination.wire.nodes import (
    EpochNode,
    SnapshotPlace,
    SnapshotPointerNode,
)
from airflow_epochs.coordination.wire.records import Attempt
from airflow_epochs.coordination.wire.vote_records import CastVote, FoldedVotes, SealNode, union_read_versions

# Rounds of the seal step lost to a concurrent pointer update before it gives the decision back.
_SEAL_ROUNDS = 5


@dataclass(frozen=True)
class SealProgress:
    """Whether the partition (and the epoch) are sealed after a seal step."""

    partition_sealed: bool
    epoch_sealed: bool
    fenced: bool = False  # the attempt was no longer current: it sealed nothing
    sealed_at: float | None = None  # when this step's own commit sealed the epoch (None: it did not)


def producers_of(version: ConfigVersion, pipeline: str, epoch: int, partition: str, producer: str) -> tuple[str, ...]:
    """The producers registered for ``partition`` under ``version``; refuses an unknown partition or producer."""
    config = version.config
    if partition not in config.partitions:
        raise UnknownPartition(
            f"pipeline {pipeline!r}: partition {partition!r} is not in the configuration of epoch "
            f"{epoch} (version {version.version}: {sorted(config.partitions)})"
        )
    producers = config.partitions[partition]
    if producer not in producers:
        raise UnknownProducer(
            f"pipeline {pipeline!r}: producer {producer!r} is not registered for partition "
            f"{partition!r} at epoch {epoch} (registered: {list(producers)})"
        )
    return tuple(producers)


def fence(ctx: PipelineContext, attempt: Attempt) -> Check:
    """The fencing check every write of an attempt carries: its attempt node is untouched (running)."""
    return Check(ctx.paths.attempt(attempt.epoch, attempt.token), 0)


def _epoch_record_body(attempt: Attempt, state: str, **extra: Any) -> dict[str, Any]:
    """The epoch record as the attempt knows it (the attempt carries every field of it)."""
    return {"state": state, "attempt": attempt.token, "owner": attempt.owner,
            "config_version": attempt.config_version, "generation": attempt.generation,
            "opened_at": attempt.opened_at, **extra}


def epoch_seal_ops(ctx: PipelineContext, attempt: Attempt, request_id: str, now: float) -> list[Step]:
    """Seal the epoch and move the frontier to it, guarded (with :func:`fence`) by the attempt.

    The record and the frontier are written without a version: only the current attempt of epoch e
    can get here, it exists only if e-1 was sealed when it opened, and everything that could change
    either of them since (a takeover, an abort, a rollback) changes the attempt node first, which
    the fence catches. The epoch seal is create-only, so the epoch is sealed once.
    """
    assert attempt.opened_at is not None
    return [
        Create(ctx.paths.epoch_seal(attempt.epoch), payloads.encode("epoch_seal", {
            "attempt": attempt.token, "generation": attempt.generation, "sealed_at": now, "request": request_id,
        })),
        SetData(ctx.paths.epoch(attempt.epoch), payloads.encode("epoch", _epoch_record_body(
            attempt, "sealed", sealed_at=now)), -1),
        SetData(ctx.paths.frontier, payloads.encode("frontier", {"epoch": attempt.epoch}), -1),
        *ctx.event(EpochSealed(epoch=attempt.epoch, attempt=attempt.token, owner=attempt.owner,
                   frontier=attempt.epoch, generation=attempt.generation)),
    ]


@dataclass
class EpochSealAhead:
    """The epoch's seal sent ahead behind a pipelined batch of votes, on the same connection: the
    fence, the seal counter at ``partitions_total`` (every partition sealed) and the epoch's seal.

    ZooKeeper runs one session's requests in the order they were sent, so this transaction runs
    after every vote sent before it: if one of those votes completed the epoch, its voter reads the
    outcome here instead of sealing the epoch in one more round trip. Sealing a complete epoch is what
    whoever looks next does anyway (create-only, once); if this transaction finds the epoch
    incomplete it writes nothing, and the vote that completes it seals it the ordinary way.
    """

    call: Call  # its own call (its own request id, recorded in the epoch's seal if it seals)
    ops: list[Step]
    pending: Any
    outcome: bool | None = None  # True: sealed (now or before); False: fenced; None: not known
    read: bool = False

    @classmethod
    def send(cls, ctx: PipelineContext, attempt: Attempt, partitions_total: int) -> EpochSealAhead:
        call = ctx.session.begin(None, ctx.op_timeout)
        attempt = with_opened_at(call, ctx, attempt)
        ops: list[Step] = [fence(ctx, attempt), Check(ctx.paths.seals(attempt.epoch, attempt.generation),
                                                      partitions_total),
                           *epoch_seal_ops(ctx, attempt, call.request_id, ctx.clock())]
        return cls(call, ops, call.send(ops))

    def sealed(self) -> bool | None:
        """Whether the epoch is sealed after this transaction ran: True (by it or before it), False
        (the attempt is no longer current), None (the epoch was not complete, or the answer was lost)."""
        if not self.read:
            self.read = True
            try:
                results = self.call.settle(self.ops, self.pending)
            except (*TRANSIENT_ERRORS, KazooException):
                return None
            failure = first_failure(self.ops, results)
            if failure is None or (failure.step is self.ops[2] and isinstance(failure.error, NodeExistsError)):
                self.outcome = True
            elif failure.step is self.ops[0]:
                self.outcome = False
        return self.outcome


def with_opened_at(call: Call, ctx: PipelineContext, attempt: Attempt) -> Attempt:
    """The attempt with ``opened_at`` filled in (handles from older callers may lack it)."""
    if attempt.opened_at is not None:
        return attempt
    found = epoch_record(call, ctx, attempt.epoch)
    if found is None:
        raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} has not been opened")
    return Attempt(attempt.pipeline, attempt.epoch, attempt.token, attempt.owner, attempt.config_version,
                   attempt.generation, attempt.request, float(found.record.opened_at), attempt.session)


def _seal_document(
    attempt: Attempt, partition: str, producers: Sequence[str], votes: Mapping[str, CastVote],
    request_id: str, now: float,
) -> SealNode:
    """The seal of ``partition`` (its votes not yet in): who left snapshots (as indices into the
    configured producers), the lineage vector, and when the first vote came."""
    upstream = _union_upstream(votes)
    return SealNode(partition, attempt.token, attempt.generation, now, request_id, attempt.config_version,
                    len(producers), tuple(i for i, name in enumerate(producers) if votes[name].snapshot is not None),
                    upstream, min((v.voted_at for v in votes.values()), default=now),
                    read_versions=union_read_versions(votes.values(), upstream))


def _folded_seal(ctx: PipelineContext, attempt: Attempt, partition: str, seal: SealNode,
                votes: Mapping[str, CastVote], *, embed: bool) -> tuple[bytes, list[Step]]:
    """The seal's payload and the ops that delete what it folds in: a sole producer's vote is kept in
    the seal (``embed``, it never had a znode); several producers' votes are kept in it too and their
    znodes (and the partition's vote counter) deleted in the seal's transaction, unless the folded seal
    would be too large (then the votes keep their znodes)."""
    kept = FoldedVotes(attempt.token, dict(votes))
    if embed:
        return replace(seal, votes=kept, sole=True).to_bytes(), []
    try:
        data = replace(seal, votes=kept).to_bytes()
    except PayloadTooLarge:
        return seal.to_bytes(), []
    paths = ctx.paths
    deletes: list[Step] = [Delete(paths.vote(attempt.epoch, attempt.token, partition, name)) for name in sorted(votes)]
    deletes.append(Delete(paths.vote_counter(attempt.epoch, attempt.token, partition)))
    return data, deletes


def seal_ops(
    ctx: PipelineContext,
    attempt: Attempt,
    partition: str,
    producers: Sequence[str],
    votes: Mapping[str, CastVote],
    pointer: Znode | None,
    request_id: str,
    now: float,
    *,
    counted: bool = True,
    embed: bool = False,
) -> list[Step]:
    """The steps that seal ``partition`` (to follow the fence): the seal with the votes folded in (see
    :func:`_folded_seal`), the seal counter (unless ``counted`` is False: the epoch's only partition
    seals the epoch in the same transaction), the snapshot pointer if some producer left a snapshot,
    and the history record."""
    seal = _seal_document(attempt, partition, producers, votes, request_id, now)
    data, deletes = _folded_seal(ctx, attempt, partition, seal, votes, embed=embed)
    ops: list[Step] = [Create(ctx.paths.seal(attempt.epoch, attempt.generation, partition), data)]
    if counted:
        ops.append(SetData(ctx.paths.seals(attempt.epoch, attempt.generation), b"", -1))
    if any(vote.snapshot is not None for vote in votes.values()):
        here = SnapshotPlace(attempt.epoch, attempt.generation, attempt.token)
        path = ctx.paths.snapshot_pointer(partition)
        if pointer is None:
            ops.append(Create(path, SnapshotPointerNode(partition, here).to_bytes()))
        else:
            old = SnapshotPointerNode.from_bytes(pointer.data, path=path)
            previous = old.previous if old.current.epoch >= attempt.epoch else old.current
            ops.append(SetData(path, SnapshotPointerNode(partition, here, previous).to_bytes(), pointer.stat.version))
    ops += ctx.event(PartitionSealed(epoch=attempt.epoch, partition=partition, attempt=attempt.token,
                     producer_count=len(producers), first_vote_at=seal.first_vote_at, generation=attempt.generation))
    return ops + deletes


def _union_upstream(votes: Mapping[str, CastVote]) -> dict[str, int]:
    """The lineage vector of a seal: per upstream pipeline, the newest epoch any producer read."""
    out: dict[str, int] = {}
    for vote in votes.values():
        for pipeline, epoch in vote.upstream.items():
            out[pipeline] = max(out.get(pipeline, 0), int(epoch))
    return out


def seal_partition(
    call: Call,
    ctx: PipelineContext,
    attempt: Attempt,
    partition: str,
    producers: Sequence[str],
    partitions_total: int,
    request_id: str,
) -> SealProgress:
    """Write the seal of ``partition`` if every producer has voted under ``attempt`` (and the epoch's
    seal if it is the last partition). Idempotent: a seal already there is reported, not rewritten."""
    paths = ctx.paths
    seal_path = paths.seal(attempt.epoch, attempt.generation, partition)
    if len(producers) == 1:  # a sole producer's vote is the seal: nothing to write from here
        if call.exists(seal_path) is None:
            return SealProgress(False, False)
        return epoch_seal_progress(call, ctx, attempt, partitions_total, request_id)
    for _ in range(_SEAL_ROUNDS):
        vote_paths = [paths.vote(attempt.epoch, attempt.token, partition, name) for name in producers]
        *vote_raws, pointer_raw, seal_raw = call.get_many(
            [*vote_paths, paths.snapshot_pointer(partition), seal_path])
        if seal_raw is not None:
            return epoch_seal_progress(call, ctx, attempt, partitions_total, request_id)
        if any(raw is None for raw in vote_raws):
            return SealProgress(False, False)
        votes = {name: CastVote.from_znode(raw.data, path, name, attempt.token)
                 for name, raw, path in zip(producers, vote_raws, vote_paths, strict=True) if raw is not None}
        now = ctx.clock()
        last = partitions_total == 1
        fenced = fence(ctx, attempt)
        sealing = seal_ops(ctx, attempt, partition, producers, votes, pointer_raw, request_id, now, counted=not last)
        ops: list[Step] = [fenced, *sealing]
        if last:
            attempt = with_opened_at(call, ctx, attempt)
            ops += epoch_seal_ops(ctx, attempt, request_id, now)
        results = commit(call, ops)
        failure = first_failure(ops, results)
        if failure is None:
            if last:
                return SealProgress(True, True, sealed_at=now)
            if sealed_count(ctx, attempt, ops, results) >= partitions_total:
                return _sealing_epoch(call, ctx, attempt, request_id)
            return SealProgress(True, False)
        error = failure.error
        if failure.step is fenced:  # the attempt is no longer current: its votes stay, it seals nothing
            return SealProgress(call.exists(seal_path) is not None,
                                call.exists(paths.epoch_seal(attempt.epoch)) is not None, fenced=True)
        if failure.step is sealing[0] and isinstance(error, NodeExistsError):
            continue  # sealed meanwhile (a repeat, or close_epoch): report what is there
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            continue  # the snapshot pointer moved meanwhile: read again
        raise error
    return SealProgress(call.exists(seal_path) is not None, call.exists(paths.epoch_seal(attempt.epoch)) is not None)


def sealed_count(ctx: PipelineContext, attempt: Attempt, ops: Sequence[Step], results: Sequence[Any]) -> int:
    """How many partitions are sealed after a committed seal: the seal counter's new version."""
    counter = ctx.paths.seals(attempt.epoch, attempt.generation)
    for op, result in zip(ops, results, strict=False):
        if isinstance(op, SetData) and op.path == counter:
            return int(result.version)
    raise ValueError("the transaction did not count its seal")


def _sealing_epoch(call: Call, ctx: PipelineContext, attempt: Attempt, request_id: str) -> SealProgress:
    """Seal the epoch after its last partition's seal; the progress says whether this commit did."""
    now = ctx.clock()
    outcome = seal_epoch_at(call, ctx, attempt, request_id, now)
    return SealProgress(True, outcome != "fenced", sealed_at=now if outcome == "sealed" else None)


def epoch_seal_progress(
    call: Call, ctx: PipelineContext, attempt: Attempt, partitions_total: int, request_id: str
) -> SealProgress:
    """The progress of a partition already sealed: the epoch sealed already, sealed now (its sealer
    died before doing so: this commit did it), or not yet."""
    if call.exists(ctx.paths.epoch_seal(attempt.epoch)) is not None:
        return SealProgress(True, True)
    counter = call.exists(ctx.paths.seals(attempt.epoch, attempt.generation))
    if counter is not None and int(counter.version) >= partitions_total:
        return _sealing_epoch(call, ctx, attempt, request_id)
    return SealProgress(True, False)


def ensure_epoch_sealed(
    call: Call, ctx: PipelineContext, attempt: Attempt, partitions_total: int, request_id: str
) -> bool:
    """Whether the epoch is sealed; seals it if every partition is and its sealer died before doing so."""
    if call.exists(ctx.paths.epoch_seal(attempt.epoch)) is not None:
        return True
    counter = call.exists(ctx.paths.seals(attempt.epoch, attempt.generation))
    if counter is not None and int(counter.version) >= partitions_total:
        return seal_epoch(call, ctx, attempt, request_id)
    return False


def seal_epoch(call: Call, ctx: PipelineContext, attempt: Attempt, request_id: str) -> bool:
    """Seal the epoch of ``attempt`` (every partition is sealed); True if it is sealed afterwards."""
    return seal_epoch_at(call, ctx, attempt, request_id, ctx.clock()) != "fenced"


def seal_epoch_at(call: Call, ctx: PipelineContext, attempt: Attempt, request_id: str, now: float) -> str:
    """Seal the epoch of ``attempt`` at ``now``: ``"sealed"`` (this commit sealed it), ``"already"``
    (sealed already under this attempt, by a repeat or by the last vote) or ``"fenced"`` (the attempt
    is no longer current; nothing written)."""
    attempt = with_opened_at(call, ctx, attempt)
    fenced = fence(ctx, attempt)
    sealing = epoch_seal_ops(ctx, attempt, request_id, now)
    ops: list[Step] = [fenced, *sealing]
    failure = first_failure(ops, commit(call, ops))
    if failure is None:
        return "sealed"
    if failure.step is sealing[0] and isinstance(failure.error, NodeExistsError):
        return "already"
    if failure.step is fenced:
        return "fenced"
    raise failure.error


def check_current(call: Call, ctx: PipelineContext, attempt: Attempt, doc: EpochNode) -> None:
    """Refuse (nothing written) if ``attempt`` is not the epoch's current, running attempt."""
    if doc.state == "sealed":
        raise EpochAlreadySealed(
            f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {doc.attempt}"
        )
    att = attempt_record(call, ctx, attempt.epoch, attempt.token)
    state = att.record.state if att is not None else "missing"
    if int(doc.attempt) != attempt.token or int(doc.generation) != attempt.generation \
            or doc.state != "open" or state != "running":
        current = attempt_record(call, ctx, attempt.epoch, int(doc.attempt))
        current_state = current.record.state if current is not None else "?"
        raise AttemptSuperseded(
            f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is no longer current "
            f"(it is {state}; the epoch is {doc.state} under attempt {doc.attempt} ({current_state}) of "
            f"{doc.owner!r}); nothing was written",
            attempt=attempt.token,
            current=int(doc.attempt),
        )
