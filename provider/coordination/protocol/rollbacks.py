"""Rollback: every epoch after a sealed one is undone (sealed or open), and the frontier moves back.

Rolled-back epochs keep their seals as the record of what was undone; each rolled-back attempt node
keeps what it had (an abort's request id) and gains the request id of the epoch seal that is
removed (``sealed_by_request``), so a close or a vote whose request sealed it is still found. The
rollback's own result is stored under ``requests/<id>``. Each live partition's snapshot pointer moves
back to the newest snapshot sealed at or before the target, wherever it is kept (:func:`_snapshot_before`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from airflow_epochs.coordination.base.call import Call, commit_or_conflict
from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidEpoch, RollbackRefused
from airflow_epochs.coordination.base.names import MAX_EPOCH
from airflow_epochs.coordination.base.steps import Delete, SetData, Step
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import frontier_with_stat
from airflow_epochs.coordination.state.retired_partitions import live_partitions, newest_retired
from airflow_epochs.coordination.state.snapshots import compacted_snapshot, newest_snapshot_place
from airflow_epochs.coordination.wire.events import Rollback
from airflow_epochs.coordination.wire.nodes import (
    AttemptNode,
    EpochNode,
    EpochSealNode,
    FrontierNode,
    PipelineRecord,
    SnapshotPlace,
    SnapshotPointerNode,
)

_MAX_ROLLBACK_EPOCHS = 1000
MAX_REASON = 500

# A family's part of a rollback: the steps it adds to the rollback's transaction (read with the call, so a
# conflict reads them again), given the epoch rolled back to.
RollbackStep = Callable[[Call, PipelineContext, int], list[Step]]


def rollback(ctx: PipelineContext, to_epoch: int, *, reason: str, request_id: str | None = None,
             steps: Sequence[RollbackStep] = ()) -> list[int]:
    """Roll back every epoch after ``to_epoch`` (see ``EpochLedger.rollback``); once per request id.

    :param steps: the recipe families' parts of the transaction (:data:`RollbackStep`).
    """
    if isinstance(to_epoch, bool) or not isinstance(to_epoch, int) or not 0 <= to_epoch <= MAX_EPOCH:
        raise InvalidEpoch(f"to_epoch must be an integer in 0..{MAX_EPOCH}, not {to_epoch!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise RollbackRefused("a rollback needs a reason; it is recorded in the history; nothing was written")

    def body(call: Call) -> list[int]:
        record = ctx.record(call)
        current_frontier, frontier_stat = frontier_with_stat(call, ctx)
        epochs = _rollback_range(ctx, record, to_epoch, current_frontier)
        ops: list[Step] = [
            *ctx.request_op(call, "rollback", epochs),
            SetData(ctx.paths.frontier, FrontierNode(to_epoch).to_bytes(), frontier_stat.version),
            SetData(ctx.paths.base, record.to_bytes(newest_epoch=to_epoch), record.version),
        ]
        undo_ops, undone = _undo_epochs(call, ctx, epochs, record.newest_epoch)
        ops += undo_ops
        ops += _snapshot_pointer_resets(call, ctx, to_epoch, record)
        ops += [op for step in steps for op in step(call, ctx, to_epoch)]
        ops += ctx.event(Rollback(to_epoch=to_epoch, from_frontier=current_frontier, epochs=undone,
                         reason=reason[:MAX_REASON], owner=ctx.owner, request=call.request_id))
        commit_or_conflict(call, ops)
        ctx.known_record = None
        return epochs

    def find(call: Call) -> list[int] | None:
        stored = ctx.stored_result(call)
        return None if stored is None else [int(e) for e in stored]

    return ctx.call(body, what=f"roll back {ctx.pipeline!r} to epoch {to_epoch}", request_id=request_id,
                    find=find)


def _rollback_range(ctx: PipelineContext, record: PipelineRecord, to_epoch: int, current_frontier: int) -> list[int]:
    """The epochs a rollback to ``to_epoch`` undoes, or :class:`RollbackRefused` (nothing written)."""
    name, newest = ctx.pipeline, record.newest_epoch
    refusal = None
    if to_epoch < record.first_epoch - 1:
        refusal = f"pipeline {name!r} starts at epoch {record.first_epoch}; cannot roll back to {to_epoch}"
    elif to_epoch < record.compacted_through:
        refusal = (f"pipeline {name!r}: epochs up to {record.compacted_through} are compacted; cannot roll back to "
                   f"{to_epoch} (keep more epochs with retain_epochs)")
    elif to_epoch > current_frontier:
        refusal = (f"pipeline {name!r}: can only roll back to a sealed epoch; {to_epoch} is after the frontier "
                   f"{current_frontier}")
    elif to_epoch >= newest:
        refusal = f"pipeline {name!r}: nothing after epoch {to_epoch} to roll back (newest epoch {newest})"
    elif newest - to_epoch > _MAX_ROLLBACK_EPOCHS:
        refusal = f"rolling back {newest - to_epoch} epochs at once exceeds {_MAX_ROLLBACK_EPOCHS}; roll back in steps"
    if refusal is not None:
        raise RollbackRefused(f"{refusal}; nothing was written")
    return list(range(to_epoch + 1, newest + 1))


def _undo_epochs(call: Call, ctx: PipelineContext, epochs: list[int], newest: int) -> tuple[list[Step], dict[str, Any]]:
    """The ops that mark ``epochs`` rolled back and fence their attempts, and what they undo."""
    p = ctx.paths
    raws = call.get_many([p.epoch(e) for e in epochs])
    nodes: list[tuple[int, Found[EpochNode]]] = []
    for epoch, raw in zip(epochs, raws, strict=True):
        if raw is None:
            raise CorruptPayload(f"{p.epoch(epoch)}: epoch {epoch} <= newest {newest} is missing")
        nodes.append((epoch, Found(EpochNode.from_bytes(raw.data, path=p.epoch(epoch)), raw.stat)))
    attempts = call.get_many([p.attempt(e, found.record.attempt) for e, found in nodes])
    seals = call.get_many([p.epoch_seal(e) for e, _ in nodes])
    ops: list[Step] = []
    undone: dict[str, Any] = {}
    for (epoch, (node, stat)), att, seal in zip(nodes, attempts, seals, strict=True):
        undone[str(epoch)] = {"state": node.state, "attempt": node.attempt, "generation": node.generation}
        ops.append(SetData(p.epoch(epoch), replace(node, state="rolled_back").to_bytes(), stat.version))
        token = node.attempt
        if att is not None:  # fences the attempt: its votes and seals are refused from now on
            fenced = replace(AttemptNode.from_bytes(att.data, path=p.attempt(epoch, token)), state="rolled_back",
                             changed_by=call.request_id)
            if seal is not None:
                sealed_by = EpochSealNode.from_bytes(seal.data, path=p.epoch_seal(epoch)).request
                fenced = replace(fenced, sealed_by_request=sealed_by)
            ops.append(SetData(p.attempt(epoch, token), fenced.to_bytes(), att.stat.version))
        if seal is not None:
            ops.append(Delete(p.epoch_seal(epoch), seal.stat.version))
    return ops, undone


def _snapshot_pointer_resets(call: Call, ctx: PipelineContext, to_epoch: int, record: PipelineRecord) -> list[Step]:
    """Point each partition's snapshot pointer back at its newest snapshot sealed at or before ``to_epoch``.

    Only a partition sealed after ``to_epoch`` (after the compaction point) can have a pointer to reset,
    so the names come from the live configurations (:func:`.live_partitions`, at most 256 a version),
    never from a listing of ``snapshots`` (one pointer per partition ever, without an archive). The
    pointer is removed only when no such snapshot exists anywhere (:func:`_snapshot_before`); when that
    cannot be known, :class:`RollbackRefused` is raised before anything is written."""
    p = ctx.paths
    ops: list[Step] = []
    partitions = sorted(live_partitions(call, ctx, record, record.compacted_through))
    paths = [p.snapshot_pointer(partition) for partition in partitions]
    for partition, path, raw in zip(partitions, paths, call.get_many(paths), strict=True):  # read together
        if raw is None:
            continue
        pointer = SnapshotPointerNode.from_bytes(raw.data, path=path)
        if pointer.current.epoch <= to_epoch:
            continue
        keep = _snapshot_before(call, ctx, pointer, to_epoch, record)
        if keep is None:
            ops.append(Delete(path, raw.stat.version))
        else:
            ops.append(SetData(path, SnapshotPointerNode(partition, keep).to_bytes(), raw.stat.version))
    return ops


def _snapshot_before(call: Call, ctx: PipelineContext, pointer: SnapshotPointerNode, to_epoch: int,
                    record: PipelineRecord) -> SnapshotPlace | None:
    """Where the newest snapshot of ``pointer``'s partition sealed at or before ``to_epoch`` is, looking
    newest first: the pointer's ``previous``, the epochs kept after the compaction point, the newest
    compacted one the compaction summary records (in full in ZooKeeper, or in the archive), the
    partition's newest retirement record (a partition removed and added back). None: it never left one.

    :raises RollbackRefused: the compaction summary was written by a version that did not record the
        newest compacted snapshot and nothing newer names one (the pointer cannot be reset truthfully).
    """
    partition = pointer.partition
    previous = pointer.previous
    if previous is not None and previous.epoch <= to_epoch:
        return previous
    kept = newest_snapshot_place(call, ctx, partition, to_epoch, record.compacted_through)
    if kept is not None:
        return kept
    compacted, known = compacted_snapshot(call, ctx, partition)
    if compacted is not None:
        return compacted
    retired = newest_retired(call, ctx, partition)
    if retired is not None and retired.pointer is not None:
        for place in (retired.pointer.current, retired.pointer.previous):
            if place is not None and place.epoch <= to_epoch:
                return place
    if not known:
        raise RollbackRefused(
            f"pipeline {ctx.pipeline!r}: epochs up to {record.compacted_through} were compacted without a record of "
            f"the newest snapshot of partition {partition!r}; rolling back to {to_epoch} would lose its last sealed "
            "snapshot; nothing was written")
    return None
