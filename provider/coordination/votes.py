"""A producer's vote: one transaction that reads nothing.

For a partition with several producers the transaction is: a fencing ``check`` of the attempt node
(a superseded, aborted or rolled-back attempt is refused by ZooKeeper itself), a create-only vote
znode of this producer (so a vote is never counted twice) carrying the request id, and an
unconditional bump of the partition's vote counter, whose new version says how many votes are in.
The voter that completes the set seals the partition (:mod:`.seals`).

A partition's sole producer completes it by voting, so its vote is the seal: the transaction is the
fence and the create-only seal with the vote inside it (and, for the epoch's only partition, the
epoch's seal and the frontier too).

After a lost answer the vote (or the seal) tells what happened: it exists with this request id (the
vote committed: finish sealing if it completed the set), or it does not (nothing was written).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.errors import (
    AttemptSuperseded,
    DuplicateVote,
    EpochAlreadySealed,
    EpochNotOpen,
    PartitionAlreadySealed,
)
from airflow_epochs.coordination.history import commit
from airflow_epochs.coordination.names import validate_name
from airflow_epochs.coordination.pipeline import PipelineContext
from airflow_epochs.coordination.reader import (
    attempt_overtaken,
    attempt_record,
    decode_vote,
    embedded_vote,
    epoch_record,
    seal_record,
)
from airflow_epochs.coordination.records import Attempt, Overtaken, VoteRecord, VoteResult, check_upstream
from airflow_epochs.coordination.seals import (
    SealProgress,
    ensure_epoch_sealed,
    epoch_seal_ops,
    fence,
    producers_of,
    seal_epoch,
    seal_ops,
    seal_partition,
    sealed_count,
    with_opened_at,
)
from airflow_epochs.coordination.session import Call, Conflict, first_failure


def vote(
    ctx: PipelineContext,
    attempt: Attempt,
    partition: str,
    producer: str,
    manifest: Mapping[str, Any] | None = None,
    *,
    snapshot: Any = None,
    upstream: Mapping[str, int] | None = None,
    request_id: str | None = None,
) -> VoteResult:
    """Record that ``producer`` finished its part of ``partition`` under ``attempt``; see
    :meth:`~airflow_epochs.coordination.ledger.EpochLedger.vote`."""
    validate_name("partition", partition)
    validate_name("producer", producer)
    body_doc = payloads.check_manifest({} if manifest is None else manifest)
    snap = payloads.check_snapshot(snapshot)
    lineage = check_upstream(upstream, limit=payloads.MAX_UPSTREAM)
    paths = ctx.paths
    vote_path = paths.vote(attempt.epoch, attempt.token, partition, producer)
    seal_path = paths.seal(attempt.epoch, attempt.generation, partition)
    # What this call knows across its rounds: whether its vote is in, and how it got there.
    state: dict[str, Any] = {"in": False, "duplicate": False, "count": None, "sealed": None}

    def same(existing: VoteRecord, lineage_there: Mapping[str, Any]) -> bool:
        return existing.manifest == body_doc and existing.snapshot == snap and dict(lineage_there) == lineage

    def cast(call: Call) -> VoteResult:
        if state["in"]:
            return finish(call)
        version = ctx.config(call, attempt.config_version)
        producers = producers_of(version, ctx.pipeline, attempt.epoch, partition, producer)
        partitions_total = len(version.config.partitions)
        now = ctx.clock()
        if len(producers) == 1:
            return cast_sole(call, producers, partitions_total, now)
        doc = {"producer": producer, "attempt": attempt.token, "manifest": body_doc, "snapshot": snap,
               "upstream": lineage, "voted_at": now, "request": call.request_id}
        results = commit(call, [
            fence(ctx, attempt),
            ("create", vote_path, payloads.encode("vote", doc), False),
            ("set", paths.vote_counter(attempt.epoch, attempt.token, partition), b"", -1),
        ])
        failure = first_failure(results)
        if failure is not None:
            return refused_shared(call, *failure)
        state["in"] = True
        state["count"] = int(results[2].version)
        return finish(call)

    def cast_sole(call: Call, producers: tuple[str, ...], partitions_total: int, now: float) -> VoteResult:
        """The only producer completes the partition: its vote is the seal, written once."""
        record = VoteRecord(attempt.epoch, partition, producer, attempt.token, body_doc, snap, call.request_id, now)
        pointer = call.get(paths.snapshot_pointer(partition)) if snap is not None else None
        ops = [fence(ctx, attempt), *seal_ops(ctx, attempt, partition, producers, {producer: record}, lineage,
                                              pointer, call.request_id, now, counted=partitions_total > 1,
                                              embed=True)]
        handle = attempt
        if partitions_total == 1:  # and the epoch's only partition: the epoch seals too
            handle = with_opened_at(call, ctx, attempt)
            ops += epoch_seal_ops(ctx, handle, call.request_id, now)
        results = commit(call, ops)
        failure = first_failure(results)
        if failure is not None:
            return refused_sole(call, *failure)
        state["in"] = True
        epoch_sealed = partitions_total == 1
        if not epoch_sealed and sealed_count(ctx, attempt, ops, results) >= partitions_total:
            epoch_sealed = seal_epoch(call, ctx, handle, call.request_id)
        state["sealed"] = SealProgress(True, epoch_sealed)
        return finish(call)

    def refused_shared(call: Call, index: int, error: BaseException) -> VoteResult:
        """The vote transaction failed: find out why, and answer truly (nothing was written)."""
        if index == 1 and isinstance(error, NodeExistsError):
            raw = call.get(vote_path)
            if raw is None:
                raise Conflict()
            existing = decode_vote(raw, attempt.epoch, partition, producer, vote_path)
            lineage_there = payloads.decode("vote", raw[0], path=vote_path).get("upstream") or {}
            return repeat(call, existing, lineage_there)
        if index == 0 and isinstance(error, (BadVersionError, NoNodeError)):
            raise not_current(call)
        if index == 1 and isinstance(error, NoNodeError):
            # This attempt holds no vote counter for the partition: sealed before it took over.
            raise sealed_before(call)
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            raise Conflict()
        raise error

    def refused_sole(call: Call, index: int, error: BaseException) -> VoteResult:
        if index == 0 and isinstance(error, (BadVersionError, NoNodeError)):
            raise not_current(call)
        if index == 1 and isinstance(error, NodeExistsError):
            raw = call.get(seal_path)
            if raw is None:
                raise Conflict()
            seal = payloads.decode("seal", raw[0], path=seal_path)
            existing = embedded_vote(seal, attempt.epoch, partition)
            if existing is None or existing.attempt != attempt.token:
                raise sealed_before(call)
            return repeat(call, existing, (seal.get("vote") or {}).get("upstream") or {})
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            raise Conflict()  # the snapshot pointer moved meanwhile: decide again
        raise error

    def repeat(call: Call, existing: VoteRecord, lineage_there: Mapping[str, Any]) -> VoteResult:
        """A vote of this producer under this attempt is recorded: ours (a repeat of this request or
        an identical one), or a different one (refused)."""
        if existing.request == call.request_id:
            state["in"] = True
            return finish(call)
        if same(existing, lineage_there):
            state["in"] = True
            state["duplicate"] = True
            return finish(call)
        raise DuplicateVote(
            f"pipeline {ctx.pipeline!r}: producer {producer!r} already voted on partition {partition!r} at "
            f"epoch {attempt.epoch} (attempt {attempt.token}) with a different manifest; nothing was written"
        )

    def sealed_before(call: Call) -> Exception:
        seal = seal_record(call, ctx, attempt.epoch, partition)
        if seal is not None:
            return PartitionAlreadySealed(
                f"pipeline {ctx.pipeline!r}: partition {partition!r} of epoch {attempt.epoch} is sealed by attempt "
                f"{seal.attempt}; the vote of {producer!r} (attempt {attempt.token}) is refused; nothing was written"
            )
        return not_current(call)

    def not_current(call: Call) -> Exception:
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None:
            record = ctx.record(call)
            if attempt.epoch <= record.compacted_through:
                return EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed and compacted; the vote of "
                    f"{producer!r} is refused; nothing was written")
            return EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} has not been opened")
        doc = found[0]
        if doc["state"] == "sealed":
            return EpochAlreadySealed(
                f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {doc['attempt']}; the vote "
                f"of {producer!r} on {partition!r} under attempt {attempt.token} was refused and nothing was written")
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        what = att[0]["state"] if att is not None else "unknown"
        return AttemptSuperseded(
            f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is no longer current (it "
            f"is {what}; the epoch is {doc['state']} under attempt {doc['attempt']} of {doc['owner']!r}); the vote "
            f"of {producer!r} on {partition!r} was refused and nothing was written",
            attempt=attempt.token, current=int(doc["attempt"]),
        )

    def finish(call: Call) -> VoteResult:
        """The vote is in: seal the partition if the set is complete (idempotently), and answer."""
        progress = state["sealed"]
        if progress is None:
            version = ctx.config(call, attempt.config_version)
            producers = version.config.partitions[partition]
            total = len(version.config.partitions)
            count = state["count"]
            if len(producers) == 1:
                progress = SealProgress(True, ensure_epoch_sealed(call, ctx, attempt, total, call.request_id))
            else:
                if count is None:
                    stat = call.exists(paths.vote_counter(attempt.epoch, attempt.token, partition))
                    count = int(stat.version) if stat is not None else 0
                progress = seal_partition(call, ctx, attempt, partition, producers, total, call.request_id) \
                    if count >= len(producers) else SealProgress(False, False)
            state["sealed"] = progress
        if progress.fenced:  # the vote is in, but its attempt was superseded before it could seal
            overtaken = vote_overtaken(call)
            if overtaken is not None:
                return overtaken_result(call, overtaken)
        return VoteResult(attempt.epoch, partition, producer, attempt.token, progress.partition_sealed,
                          progress.epoch_sealed, duplicate=state["duplicate"], request=call.request_id)

    def vote_overtaken(call: Call) -> Overtaken | None:
        """What happened to this vote's attempt since (None: current, or it sealed the epoch)."""
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None:
            return None
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        overtaken = attempt_overtaken(attempt.token, attempt.generation, found[0], att[0] if att else None)
        if overtaken is not None and overtaken.change == "sealed":
            return None  # sealed by this very attempt: the vote counted
        return overtaken

    def overtaken_result(call: Call, overtaken: Overtaken) -> VoteResult:
        """A committed vote of an attempt that is no longer current: sealed only what it sealed before."""
        seal = seal_record(call, ctx, attempt.epoch, partition)
        ours = overtaken.change != "rolled_back" and seal is not None and seal.attempt == attempt.token \
            and seal.generation == attempt.generation
        epoch_sealed = ours and call.exists(paths.epoch_seal(attempt.epoch)) is not None
        return VoteResult(attempt.epoch, partition, producer, attempt.token, ours, epoch_sealed,
                          duplicate=state["duplicate"], request=call.request_id, overtaken=overtaken)

    def find(call: Call) -> VoteResult | None:
        """Did this request's vote commit (its answer was lost, or the caller repeats the request)?"""
        raw = call.get(vote_path)
        if raw is not None:
            if decode_vote(raw, attempt.epoch, partition, producer, vote_path).request != call.request_id:
                return None
        else:
            raw = call.get(seal_path)
            existing = embedded_vote(payloads.decode("seal", raw[0], path=seal_path), attempt.epoch, partition) \
                if raw is not None else None
            if existing is None or existing.request != call.request_id:
                return None
        overtaken = vote_overtaken(call)
        if overtaken is not None:
            return overtaken_result(call, overtaken)
        state["in"] = True
        return finish(call)

    return ctx.call(cast, what=f"vote {producer!r} on {partition!r} at epoch {attempt.epoch}",
                    request_id=request_id, find=find)
