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
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import (
    AttemptSuperseded,
    DuplicateVote,
    EpochAlreadySealed,
    EpochNotOpen,
    PartitionAlreadySealed,
)
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.steps import Create, SetData, Step, first_failure
from airflow_epochs.coordination.protocol.seals import (
    EpochSealAhead,
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
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import (
    attempt_overtaken,
    attempt_record,
    epoch_record,
    seal_record,
)
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.records import (
    Attempt,
    Overtaken,
    VoteResult,
    check_read_versions,
    check_upstream,
)
from airflow_epochs.coordination.wire.vote_records import CastVote, folded_vote


def vote(
    ctx: PipelineContext,
    attempt: Attempt,
    partition: str,
    producer: str,
    manifest: Mapping[str, Any] | None = None,
    *,
    snapshot: Any = None,
    upstream: Mapping[str, int] | None = None,
    read_versions: Mapping[str, int] | None = None,
    request_id: str | None = None,
) -> VoteResult:
    """Record that ``producer`` finished its part of ``partition`` under ``attempt``; see
    :meth:`~airflow_epochs.coordination.ledger.EpochLedger.vote`."""
    validate_name("partition", partition)
    validate_name("producer", producer)
    lineage = check_upstream(upstream, limit=payloads.MAX_UPSTREAM)
    voting = Voting(ctx, attempt, partition, producer, payloads.check_manifest({} if manifest is None else manifest),
                    payloads.check_snapshot(snapshot), lineage,
                    check_read_versions(read_versions, lineage, pipeline=ctx.pipeline))
    return ctx.call(voting.cast, what=f"vote {producer!r} on {partition!r} at epoch {attempt.epoch}",
                    request_id=request_id, find=voting.find)


@dataclass(frozen=True)
class SentVote:
    """A vote's transaction, prepared (``pending`` None) or sent; its answer is awaited by
    :meth:`Voting.settle`."""

    ops: list[Step]
    pending: Any  # kazoo's async result of the transaction
    partitions_total: int
    handle: Attempt  # the attempt, with ``opened_at`` when the vote may seal the epoch
    sole: bool  # the partition's only producer: the vote is the seal


@dataclass(eq=False)
class Voting:
    """One ``vote`` call, read top to bottom: cast (the one transaction), refused (why it failed,
    matched by the step that failed), finish (seal if the set is complete), and find (after a lost
    answer or for a repeated request id). It remembers across rounds whether its vote is in.

    Built from the checked arguments of :func:`vote` (``lineage``: its checked ``upstream``, ``reads``
    its checked ``read_versions``)."""

    ctx: PipelineContext
    attempt: Attempt
    partition: str
    producer: str
    manifest: dict[str, Any]
    snapshot: Any
    lineage: dict[str, int]
    reads: dict[str, int] = field(default_factory=dict)
    voted: bool = field(default=False, init=False)  # this request's vote is in
    duplicate: bool = field(default=False, init=False)  # ... as an identical vote of another request
    count: int | None = field(default=None, init=False)  # votes in, as the counter said when this vote was cast
    progress: SealProgress | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.paths = self.ctx.paths
        self.vote_path = self.paths.vote(self.attempt.epoch, self.attempt.token, self.partition, self.producer)
        self.seal_path = self.paths.seal(self.attempt.epoch, self.attempt.generation, self.partition)
        self.counter_path = self.paths.vote_counter(self.attempt.epoch, self.attempt.token, self.partition)

    # -- casting -------------------------------------------------------------------------------

    def cast(self, call: Call) -> VoteResult:
        """The blocking path: send the vote's transaction and wait for its answer."""
        if self.voted:
            return self.finish(call)
        return self.settle(call, self.send(call))

    def pointer_path(self, call: Call) -> str | None:
        """The snapshot pointer the vote's transaction must read first: a sole producer leaving a
        snapshot moves its partition's pointer in the seal (None: the vote reads nothing)."""
        if self.snapshot is None or not self.sole(call):
            return None
        return self.paths.snapshot_pointer(self.partition)

    def sole(self, call: Call) -> bool:
        """Whether this producer is its partition's only one (its vote is the seal; it has no vote znode)."""
        producers = self.ctx.config(call, self.attempt.config_version).config.partitions.get(self.partition)
        return producers is not None and tuple(producers) == (self.producer,)

    def send(self, call: Call, pointer_read: Any = None) -> SentVote:
        """Build the vote's transaction (:meth:`prepare`) and send it without waiting for the answer."""
        return self.sent(call, self.prepare(call, pointer_read))

    @staticmethod
    def sent(call: Call, prepared: SentVote) -> SentVote:
        """Send a prepared vote's transaction without waiting (pipelined voting prepares every vote of a
        batch first, then sends them back to back)."""
        return replace(prepared, pending=call.send(prepared.ops))

    def prepare(self, call: Call, pointer_read: Any = None) -> SentVote:
        """Build the vote's transaction, not sent yet (``pending`` is None): a partition of several
        producers gets the fence, the create-only vote and the counter bump; a sole producer's vote is
        its partition's seal.

        ``pointer_read``: the snapshot pointer's read, sent ahead (:meth:`Call.read_ahead`) for the
        path :meth:`pointer_path` names; without it that read is made here, blocking."""
        attempt = self.attempt
        version = self.ctx.config(call, attempt.config_version)
        producers = producers_of(version, self.ctx.pipeline, attempt.epoch, self.partition, self.producer)
        partitions_total = len(version.config.partitions)
        now = self.ctx.clock()
        if len(producers) > 1:
            shared: list[Step] = [
                fence(self.ctx, attempt),
                Create(self.vote_path, self.cast_vote(call, now).znode_bytes()),
                SetData(self.counter_path, b""),
            ]
            return SentVote(shared, None, partitions_total, attempt, sole=False)
        pointer = None
        if pointer_read is not None:
            pointer = call.read_answer(pointer_read)
        elif self.snapshot is not None:
            pointer = call.get(self.paths.snapshot_pointer(self.partition))
        ops: list[Step] = [fence(self.ctx, attempt), *seal_ops(
            self.ctx, attempt, self.partition, producers, {self.producer: self.cast_vote(call, now)}, pointer,
            call.request_id, now, counted=partitions_total > 1, embed=True)]
        handle = attempt
        if partitions_total == 1:  # and the epoch's only partition: the epoch seals too
            handle = with_opened_at(call, self.ctx, attempt)
            ops += epoch_seal_ops(self.ctx, handle, call.request_id, now)
        return SentVote(ops, None, partitions_total, handle, sole=True)

    def settle(self, call: Call, sent: SentVote, ahead: EpochSealAhead | None = None) -> VoteResult:
        """Wait for the answer of a sent vote and read it: refused (why, matched by the step that failed),
        or in (then seal what it completed). ``ahead``: the epoch's seal, sent after this vote on the
        same connection (a vote that completes the epoch reads its outcome instead of sealing)."""
        results = call.settle(sent.ops, sent.pending)
        failure = first_failure(sent.ops, results)
        if failure is not None:
            step, error = failure.step, failure.error
            return self.refused_sole(call, step, error) if sent.sole else self.refused_shared(call, step, error)
        self.voted = True
        if not sent.sole:
            self.count = int(results[2].version)  # the vote counter's new version
            return self.finish(call)
        epoch_sealed = sent.partitions_total == 1
        fenced = False
        if not epoch_sealed and sealed_count(self.ctx, self.attempt, sent.ops, results) >= sent.partitions_total:
            sealed_ahead = ahead.sealed() if ahead is not None else None
            epoch_sealed = sealed_ahead if sealed_ahead is not None else \
                seal_epoch(call, self.ctx, sent.handle, call.request_id)
            fenced = not epoch_sealed  # the vote completed the epoch, but its attempt was overtaken since
        self.progress = SealProgress(True, epoch_sealed, fenced=fenced)
        return self.finish(call)

    def cast_vote(self, call: Call, now: float) -> CastVote:
        return CastVote(self.producer, self.attempt.token, self.manifest, call.request_id, now, self.snapshot,
                        self.lineage, self.reads)

    def folded(self, call: Call) -> CastVote | None:
        """This producer's vote under this attempt kept in the partition's seal (folded or sole), or None."""
        vote = folded_vote(call.get(self.seal_path), self.producer, self.seal_path)
        return vote if vote is not None and vote.attempt == self.attempt.token else None

    # -- refusals: why the transaction failed, matched by the step that failed ----------------------

    def refused_shared(self, call: Call, step: Step, error: BaseException) -> VoteResult:
        """The vote transaction failed: find out why, and answer truly (nothing was written)."""
        fenced = step.path == self.paths.attempt(self.attempt.epoch, self.attempt.token)
        if step.path == self.vote_path and isinstance(error, NodeExistsError):
            raw = call.get(self.vote_path)
            if raw is None:
                raise Conflict()
            return self.repeat(call, CastVote.from_znode(raw.data, self.vote_path, self.producer, self.attempt.token))
        if fenced and isinstance(error, (BadVersionError, NoNodeError)):
            raise self.not_current(call)
        if step.path == self.vote_path and isinstance(error, NoNodeError):
            # This attempt holds no vote counter for the partition: its seal folded the votes in (this
            # producer's among them), or the partition was sealed before this attempt took over.
            folded = self.folded(call)
            if folded is not None:
                return self.repeat(call, folded)
            raise self.sealed_before(call)
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            raise Conflict()
        raise error

    def refused_sole(self, call: Call, step: Step, error: BaseException) -> VoteResult:
        if step.path == self.paths.attempt(self.attempt.epoch, self.attempt.token) and \
                isinstance(error, (BadVersionError, NoNodeError)):
            raise self.not_current(call)
        if step.path == self.seal_path and isinstance(error, NodeExistsError):
            existing = self.folded(call)
            if existing is None:
                raise self.sealed_before(call)
            return self.repeat(call, existing)
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            raise Conflict()  # the snapshot pointer moved meanwhile: decide again
        raise error

    def repeat(self, call: Call, existing: CastVote) -> VoteResult:
        """A vote of this producer under this attempt is recorded: ours (a repeat of this request or
        an identical one), or a different one (refused)."""
        if existing.request == call.request_id:
            self.voted = True
            return self.finish(call)
        if existing.manifest == self.manifest and existing.snapshot == self.snapshot \
                and dict(existing.upstream) == self.lineage and dict(existing.read_versions) == self.reads:
            self.voted = True
            self.duplicate = True
            return self.finish(call)
        raise DuplicateVote(
            f"pipeline {self.ctx.pipeline!r}: producer {self.producer!r} already voted on partition "
            f"{self.partition!r} at epoch {self.attempt.epoch} (attempt {self.attempt.token}) with a different "
            "manifest; nothing was written"
        )

    def sealed_before(self, call: Call) -> Exception:
        seal = seal_record(call, self.ctx, self.attempt.epoch, self.partition)
        if seal is not None:
            return PartitionAlreadySealed(
                f"pipeline {self.ctx.pipeline!r}: partition {self.partition!r} of epoch {self.attempt.epoch} is "
                f"sealed by attempt {seal.attempt}; the vote of {self.producer!r} (attempt {self.attempt.token}) is "
                "refused; nothing was written"
            )
        return self.not_current(call)

    def not_current(self, call: Call) -> Exception:
        ctx, attempt, producer, partition = self.ctx, self.attempt, self.producer, self.partition
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None:
            record = ctx.record(call)
            if attempt.epoch <= record.compacted_through and archived_call(call, ctx, attempt.epoch) is not None:
                return EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed and archived, and its archive "
                    f"holds no vote of {producer!r} under request {call.request_id!r}; the vote is refused and "
                    "nothing was written")
            if attempt.epoch <= record.compacted_through:
                # Compaction took the epoch's votes and no archive holds them (an archived vote of this
                # request id is found before this refusal): only what this call did not send is certain.
                earlier = "a write of this call was sent" if call.sent else "an earlier call under this request id"
                return EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed and compacted; the vote of "
                    f"{producer!r} is refused (whether {earlier} ({call.request_id!r}) voted is no longer on "
                    "record)")
            return EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} has not been opened")
        doc = found.record
        if doc.state == "sealed":
            return EpochAlreadySealed(
                f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {doc.attempt}; the vote "
                f"of {producer!r} on {partition!r} under attempt {attempt.token} was refused and nothing was written")
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        what = att.record.state if att is not None else "unknown"
        return AttemptSuperseded(
            f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is no longer current (it "
            f"is {what}; the epoch is {doc.state} under attempt {doc.attempt} of {doc.owner!r}); the vote "
            f"of {producer!r} on {partition!r} was refused and nothing was written",
            attempt=attempt.token, current=int(doc.attempt),
        )

    # -- finishing -----------------------------------------------------------------------------

    def finish(self, call: Call) -> VoteResult:
        """The vote is in: seal the partition if the set is complete (idempotently), and answer."""
        attempt = self.attempt
        progress = self.progress
        if progress is None:
            version = self.ctx.config(call, attempt.config_version)
            producers = version.config.partitions[self.partition]
            total = len(version.config.partitions)
            if len(producers) == 1:
                progress = SealProgress(True, ensure_epoch_sealed(call, self.ctx, attempt, total, call.request_id))
            else:
                count = self.count
                if count is None:
                    stat = call.exists(self.counter_path)
                    # no counter: the partition's seal folded the votes in (seal_partition reports it)
                    count = int(stat.version) if stat is not None else len(producers)
                progress = seal_partition(call, self.ctx, attempt, self.partition, producers, total,
                                          call.request_id) if count >= len(producers) else SealProgress(False, False)
            self.progress = progress
        if progress.fenced:  # the vote is in, but its attempt was superseded before it could seal
            overtaken = self.overtaken(call)
            if overtaken is not None:
                return self.overtaken_result(call, overtaken)
        return VoteResult(attempt.epoch, self.partition, self.producer, attempt.token, progress.partition_sealed,
                          progress.epoch_sealed, duplicate=self.duplicate, request=call.request_id)

    def overtaken(self, call: Call) -> Overtaken | None:
        """What happened to this vote's attempt since (None: current, or it sealed the epoch)."""
        found = epoch_record(call, self.ctx, self.attempt.epoch)
        if found is None:
            return None
        att = attempt_record(call, self.ctx, self.attempt.epoch, self.attempt.token)
        overtaken = attempt_overtaken(self.attempt.token, self.attempt.generation, found.record,
                                      att.record if att else None)
        if overtaken is not None and overtaken.change == "sealed":
            return None  # sealed by this very attempt: the vote counted
        return overtaken

    def overtaken_result(self, call: Call, overtaken: Overtaken) -> VoteResult:
        """A committed vote of an attempt that is no longer current: sealed only what it sealed before."""
        attempt = self.attempt
        seal = seal_record(call, self.ctx, attempt.epoch, self.partition)
        ours = overtaken.change != "rolled_back" and seal is not None and seal.attempt == attempt.token \
            and seal.generation == attempt.generation
        epoch_sealed = ours and call.exists(self.paths.epoch_seal(attempt.epoch)) is not None
        return VoteResult(attempt.epoch, self.partition, self.producer, attempt.token, ours, epoch_sealed,
                          duplicate=self.duplicate, request=call.request_id, overtaken=overtaken)

    def find(self, call: Call) -> VoteResult | None:
        """Did this request's vote commit (its answer was lost, or the caller repeats the request)?"""
        # a sole producer never has a vote znode: its vote is kept in its partition's seal
        raw = None if self.sole(call) else call.get(self.vote_path)
        existing = CastVote.from_znode(raw.data, self.vote_path, self.producer, self.attempt.token) \
            if raw is not None else self.folded(call)
        if existing is None:  # the epoch may have left ZooKeeper since: its archive keeps its votes
            past = archived_call(call, self.ctx, self.attempt.epoch)
            return None if past is None else self.find(past)
        if existing.request != call.request_id:
            return None
        overtaken = self.overtaken(call)
        if overtaken is not None:
            return self.overtaken_result(call, overtaken)
        self.voted = True
        return self.finish(call)
