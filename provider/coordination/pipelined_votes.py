"""Pipelined voting: a process that votes for many producers (a Spark job sealing many partitions,
a worker hosting several producers) sends every vote's transaction before it waits for the first
answer, on its one ZooKeeper connection, instead of one blocking call per vote.

Each vote is still its own call: its own request id and deadline, the same transaction as
:func:`~.votes.vote` (built by the same :class:`~.votes.Voting`), the same fencing, and its answer
read by the same code. Only the waiting differs: the transactions are in flight together. A vote
whose pipelined answer is lost, or whose round must be decided again, goes on exactly as a blocking
vote does (it looks its request id up, then casts again if nothing committed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.errors import EpochsError, InvalidInput
from airflow_epochs.coordination.names import validate_name
from airflow_epochs.coordination.pipeline import PipelineContext
from airflow_epochs.coordination.records import Attempt, VoteResult, check_upstream
from airflow_epochs.coordination.seals import producers_of
from airflow_epochs.coordination.session import TRANSIENT_ERRORS, Call, validate_request_id
from airflow_epochs.coordination.votes import SentVote, Voting

# Votes one pipelined batch may carry (each is a transaction in flight on the same connection;
# ZooKeeper's globalOutstandingLimit is 1,000 requests per server).
MAX_BALLOTS = 512


@dataclass(frozen=True)
class Ballot:
    """One vote of a pipelined batch: the arguments of :meth:`~.ledger.EpochLedger.vote`."""

    partition: str
    producer: str
    manifest: Mapping[str, Any] | None = None
    snapshot: Any = None
    upstream: Mapping[str, int] | None = None
    request_id: str | None = None


def vote_many(ctx: PipelineContext, attempt: Attempt, ballots: Sequence[Ballot]) -> list[VoteResult | EpochsError]:
    """Cast ``ballots`` under ``attempt``, pipelined; see :meth:`~.ledger.EpochLedger.vote_many`.

    Every ballot is checked (names, manifest, snapshot, lineage, request id, partition and producer
    in the attempt's configuration) before any transaction is sent.
    """
    if not 1 <= len(ballots) <= MAX_BALLOTS:
        raise InvalidInput(f"vote_many takes 1 to {MAX_BALLOTS} ballots, not {len(ballots)}")
    votings = [_voting(ctx, attempt, ballot) for ballot in ballots]
    seen = [(b.partition, b.producer) for b in ballots]
    if len(set(seen)) != len(seen):
        raise InvalidInput(f"vote_many: a producer votes once per partition in a batch, not twice ({seen})")
    version = ctx.call(lambda call: ctx.config(call, attempt.config_version),
                       what=f"read the configuration of epoch {attempt.epoch}")
    for ballot in ballots:  # an unknown partition or producer is refused before anything is sent
        producers_of(version, ctx.pipeline, attempt.epoch, ballot.partition, ballot.producer)
    begun = [_send(ctx, voting, ballot) for voting, ballot in zip(votings, ballots, strict=True)]
    return [_settle(ctx, voting, ballot, call, sent)
            for voting, ballot, (call, sent) in zip(votings, ballots, begun, strict=True)]


def _voting(ctx: PipelineContext, attempt: Attempt, ballot: Ballot) -> Voting:
    if not isinstance(ballot, Ballot):
        raise InvalidInput(f"vote_many takes Ballot records, not {type(ballot).__name__}")
    validate_name("partition", ballot.partition)
    validate_name("producer", ballot.producer)
    if ballot.request_id is not None:
        validate_request_id(ballot.request_id)
    manifest = payloads.check_manifest({} if ballot.manifest is None else ballot.manifest)
    return Voting(ctx, attempt, ballot.partition, ballot.producer, manifest, payloads.check_snapshot(ballot.snapshot),
                  check_upstream(ballot.upstream, limit=payloads.MAX_UPSTREAM))


def _send(ctx: PipelineContext, voting: Voting, ballot: Ballot) -> tuple[Call, SentVote | None]:
    """Begin the vote's call and send its transaction (None: it could not be sent now, and the call
    will cast it the blocking way)."""
    call = ctx.session.begin(ballot.request_id, ctx.op_timeout)
    try:
        return call, voting.send(call)
    except TRANSIENT_ERRORS:
        return call, None


def _settle(ctx: PipelineContext, voting: Voting, ballot: Ballot, call: Call,
            sent: SentVote | None) -> VoteResult | EpochsError:
    pending = [sent] if sent is not None else []

    def body(round_call: Call) -> VoteResult:
        if pending:  # the first round reads the pipelined answer; later rounds cast as a blocking vote does
            return voting.settle(round_call, pending.pop())
        return voting.cast(round_call)

    what = f"vote {ballot.producer!r} on {ballot.partition!r} at epoch {voting.attempt.epoch}"
    try:
        return ctx.call(body, what=what, request_id=ballot.request_id, find=voting.find, started=call)
    except EpochsError as exc:
        return exc
