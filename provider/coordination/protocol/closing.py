"""Closing an epoch: seal every partition whose votes are all in (finishing a seal a dead voter left),
then the epoch, under the attempt's fence; a repeated close finds the first one's outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import (
    EpochAlreadySealed,
    EpochIncomplete,
    EpochNotOpen,
    EpochOutOfOrder,
)
from airflow_epochs.coordination.protocol.seals import check_current, seal_epoch_at, seal_partition
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import (
    attempt_overtaken,
    attempt_record,
    epoch_info,
    epoch_record,
    info_of_record,
)
from airflow_epochs.coordination.wire.nodes import (
    EpochNode,
    EpochSealNode,
    FrontierNode,
)
from airflow_epochs.coordination.wire.records import Attempt, EpochInfo, Overtaken
from airflow_epochs.coordination.wire.vote_records import SealNode


def close_epoch(ctx: PipelineContext, attempt: Attempt, request_id: str | None = None) -> EpochInfo:
    """Seal the epoch once every partition is sealed, finishing any seal a dead voter left unwritten.

    Idempotent. Raises :class:`EpochIncomplete` naming the partitions still missing votes, before
    writing anything: a refused close writes no seal. A close that finishes a dead voter's seal
    reports it in the epoch it returns (the partition is sealed there).
    """

    def body(call: Call) -> EpochInfo:
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None:
            info = epoch_info(call, ctx, attempt.epoch)
            if info is not None and info.state == "sealed":
                raise EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed and compacted (whether request "
                    f"{call.request_id!r} sealed it is no longer on record)")
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} has not been opened; nothing was "
                               "written")
        doc = found.record
        if doc.state == "sealed":
            if int(doc.attempt) != attempt.token or int(doc.generation) != attempt.generation:
                raise EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} was sealed by attempt {doc.attempt} of "
                    f"{doc.owner!r}, not by attempt {attempt.token}; nothing was written",
                    sealed_by_attempt=int(doc.attempt), sealed_by_owner=doc.owner, generation=int(doc.generation))
            # From this read: a second read could find a rollback that landed since, and answer
            # "rolled_back" without saying it was overtaken (the outcome table allows neither).
            return info_of_record(call, ctx, attempt.epoch, doc)
        check_current(call, ctx, attempt, doc)
        version = ctx.config(call, attempt.config_version)
        partitions = version.config.partitions
        sealed = set(call.children(ctx.paths.seals(attempt.epoch, attempt.generation)) or [])
        unsealed = sorted(p for p in partitions if p not in sealed)
        incomplete = incomplete_partitions(call, ctx, attempt, {p: partitions[p] for p in unsealed})
        seals = [ctx.paths.seal(attempt.epoch, attempt.generation, p) for p in incomplete]
        if any(stat is not None for stat in call.exists_many(seals)):
            raise Conflict()  # sealed (and its counter folded away) between the two reads: read again
        if incomplete:
            raise EpochIncomplete(
                f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} cannot be closed; partitions not sealed yet "
                f"(votes missing): {incomplete}; nothing was written",
                missing=incomplete,
            )
        epoch_sealed = call.exists(ctx.paths.epoch_seal(attempt.epoch)) is not None
        if not epoch_sealed:
            frontier_raw = call.get(ctx.paths.frontier)
            frontier = FrontierNode.from_bytes(frontier_raw.data, path=ctx.paths.frontier).epoch if frontier_raw else -1
            if frontier != attempt.epoch - 1:
                raise EpochOutOfOrder(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} cannot be sealed while the frontier is "
                    f"{frontier}; nothing was written"
                )
        sealed_at: float | None = None  # when this close's own commit sealed the epoch
        for partition in unsealed:  # every producer voted: finish the seals their voters did not write
            progress = seal_partition(call, ctx, attempt, partition, partitions[partition], len(partitions),
                                      call.request_id)
            if not progress.partition_sealed:
                raise Conflict()  # the attempt changed under us: decide again on fresh state
            sealed_at = progress.sealed_at if progress.sealed_at is not None else sealed_at
        if sealed_at is None and call.exists(ctx.paths.epoch_seal(attempt.epoch)) is None:
            now = ctx.clock()
            outcome = seal_epoch_at(call, ctx, attempt, call.request_id, now)
            if outcome == "fenced":
                raise Conflict()
            sealed_at = now if outcome == "sealed" else None
        if sealed_at is not None:
            # The answer is what this close's commit wrote: a fresh read of the epoch could find a rollback
            # (and a reopening) by another owner that landed right after it.
            return info_of_record(call, ctx, attempt.epoch, _as_sealed(attempt, doc, sealed_at))
        return _sealed_by(call, ctx, attempt, doc)

    return ctx.call(body, what=f"close epoch {attempt.epoch} of {ctx.pipeline!r}", request_id=request_id,
                    find=lambda call: _find_close(call, ctx, attempt))


def incomplete_partitions(
    call: Call, ctx: PipelineContext, attempt: Attempt, unsealed: Mapping[str, Sequence[str]]
) -> list[str]:
    """The unsealed partitions still missing votes under ``attempt`` (the vote counters' versions)."""
    shared = [p for p, producers in unsealed.items() if len(producers) > 1]
    counters = call.exists_many([ctx.paths.vote_counter(attempt.epoch, attempt.token, p) for p in shared])
    complete = {p for p, stat in zip(shared, counters, strict=True)
                if stat is not None and int(stat.version) >= len(unsealed[p])}
    # a sole producer's vote is its partition's seal: unsealed means not voted
    return sorted(p for p in unsealed if p not in complete)


def _find_close(call: Call, ctx: PipelineContext, attempt: Attempt) -> EpochInfo | None:
    """What this call's request id sealed of the epoch, flagged if it was overtaken since; None if it
    sealed nothing, or sealed some partitions of an attempt still current (the close goes on)."""
    found = epoch_record(call, ctx, attempt.epoch)
    if found is None:
        return None

    def info() -> EpochInfo:  # the answer from this one read of the record (a second could differ)
        return info_of_record(call, ctx, attempt.epoch, found.record)

    paths = ctx.paths
    seal_raw = call.get(paths.epoch_seal(attempt.epoch))
    if seal_raw is not None and \
            EpochSealNode.from_bytes(seal_raw.data, path=paths.epoch_seal(attempt.epoch)).request == call.request_id:
        return info()
    att = attempt_record(call, ctx, attempt.epoch, attempt.token)
    if att is not None and att.record.sealed_by_request == call.request_id:
        # the epoch as this request sealed it, not as it stands now (rolled back, perhaps reopened since)
        return replace(info_of_record(call, ctx, attempt.epoch, _as_sealed(attempt, found.record, None)),
                       overtaken=Overtaken("rolled_back"))
    names = call.children(paths.seals(attempt.epoch, attempt.generation)) or []
    seal_paths = [paths.seal(attempt.epoch, attempt.generation, name) for name in names]
    if not any(raw is not None and SealNode.from_bytes(raw.data, path=path).request == call.request_id
               for raw, path in zip(call.get_many(seal_paths), seal_paths, strict=True)):
        return None
    overtaken = attempt_overtaken(attempt.token, attempt.generation, found.record, att.record if att else None)
    if overtaken is None:
        return None
    if overtaken.change == "sealed" and overtaken.current == attempt.token:
        return info()
    return replace(info(), overtaken=overtaken)


def _sealed_by(call: Call, ctx: PipelineContext, attempt: Attempt, doc: EpochNode) -> EpochInfo:
    """The epoch as sealed under ``attempt`` by another call (the last vote, a repeat), from its epoch
    seal, which exists exactly while that seal stands; gone, a rollback undid it since (overtaken)."""
    path = ctx.paths.epoch_seal(attempt.epoch)
    raw = call.get(path)
    seal = None if raw is None else EpochSealNode.from_bytes(raw.data, path=path)
    if seal is None or (seal.attempt, seal.generation) != (attempt.token, attempt.generation):
        sealed = info_of_record(call, ctx, attempt.epoch, _as_sealed(attempt, doc, None))
        return replace(sealed, overtaken=Overtaken("rolled_back"))
    return info_of_record(call, ctx, attempt.epoch, _as_sealed(attempt, doc, seal.sealed_at))


def _as_sealed(attempt: Attempt, doc: EpochNode, sealed_at: float | None) -> EpochNode:
    """The epoch record as ``attempt`` sealed it (``doc``: the record as read, for what the attempt lacks)."""
    return EpochNode("sealed", attempt.token, attempt.owner, attempt.config_version, attempt.generation,
                     attempt.opened_at if attempt.opened_at is not None else doc.opened_at, sealed_at)
