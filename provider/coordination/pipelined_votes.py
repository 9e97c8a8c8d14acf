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
from airflow_epochs.coordination.config import ConfigVersion
from airflow_epochs.coordination.errors import EpochsError, InvalidInput
from airflow_epochs.coordination.names import validate_name
from airflow_epochs.coordination.pipeline import PipelineContext
from airflow_epochs.coordination.records import Attempt, VoteResult, check_upstream
from airflow_epochs.coordination.seals import EpochSealAhead, producers_of
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
    calls = [ctx.session.begin(ballot.request_id, ctx.op_timeout) for ballot in ballots]
    # the snapshot pointers the transactions need are read first, all in flight together
    reads = [_read_ahead(call, voting) for call, voting in zip(calls, votings, strict=True)]
    # every transaction is built before the first is sent, then they are sent back to back
    prepared = [_prepare(voting, call, read) for voting, call, read in zip(votings, calls, reads, strict=True)]
    begun = [_send(call, vote) for call, vote in zip(calls, prepared, strict=True)]
    ahead = _seal_ahead(ctx, attempt, version, votings, begun)
    _await_last(ahead, begun)
    results = [_settle(ctx, voting, ballot, call, sent, ahead)
               for voting, ballot, (call, sent) in zip(votings, ballots, begun, strict=True)]
    if ahead is not None:
        ahead.sealed()  # its answer is read whether or not a vote needed it
    return results


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


def _read_ahead(call: Call, voting: Voting) -> Any:
    path = voting.pointer_path(call)
    if path is None:
        return None
    try:
        return call.read_ahead(path)
    except Exception:  # noqa: BLE001 - the send reads it again, and answers for its own ballot
        return None


class _Unsent:
    """A ballot whose transaction was not sent: a transient error (the call casts it the blocking way),
    or an error that is this ballot's answer (raised in its call, so it is reported as ``vote`` would)."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _prepare(voting: Voting, call: Call, pointer_read: Any) -> SentVote | _Unsent:
    """Build the vote's transaction. An error here belongs to this ballot alone: the others are sent
    and settled as usual."""
    try:
        return voting.prepare(call, pointer_read)
    except TRANSIENT_ERRORS:
        return _Unsent(None)
    except Exception as exc:  # noqa: BLE001 - answered in the ballot's slot (see _settle)
        return _Unsent(exc)


def _send(call: Call, vote: SentVote | _Unsent) -> tuple[Call, SentVote | _Unsent]:
    if isinstance(vote, _Unsent):
        return call, vote
    try:
        return call, Voting.sent(call, vote)
    except TRANSIENT_ERRORS:
        return call, _Unsent(None)
    except Exception as exc:  # noqa: BLE001 - answered in the ballot's slot (see _settle)
        return call, _Unsent(exc)


def _seal_ahead(ctx: PipelineContext, attempt: Attempt, version: ConfigVersion, votings: Sequence[Voting],
                begun: Sequence[tuple[Call, SentVote | _Unsent]]) -> EpochSealAhead | None:
    """Send the epoch's seal behind the batch if one of its votes may complete the epoch (a sole
    producer's vote seals its partition; the epoch's only partition seals the epoch by itself)."""
    total = len(version.config.partitions)
    if total < 2 or not any(isinstance(sent, SentVote) and sent.sole for _, sent in begun):
        return None
    try:
        return EpochSealAhead.send(ctx, attempt, total)
    except Exception:  # noqa: BLE001 - not sent: a vote that completes the epoch seals it itself
        return None


def _await_last(ahead: EpochSealAhead | None, begun: Sequence[tuple[Call, SentVote | _Unsent]]) -> None:
    """Wait for the answer of the last transaction sent (ZooKeeper answers a connection's requests in
    order): the answers before it are then read without one wake-up of this thread per answer."""
    if ahead is not None:
        ahead.call.await_answer(ahead.pending)
        return
    for call, sent in reversed(begun):
        if isinstance(sent, SentVote):
            call.await_answer(sent.pending)
            return


def _settle(ctx: PipelineContext, voting: Voting, ballot: Ballot, call: Call, sent: SentVote | _Unsent,
            ahead: EpochSealAhead | None) -> VoteResult | EpochsError:
    pending = [sent]

    def body(round_call: Call) -> VoteResult:
        if pending:  # the first round reads the pipelined answer; later rounds cast as a blocking vote does
            first = pending.pop()
            if isinstance(first, SentVote):
                return voting.settle(round_call, first, ahead)
            if first.error is not None:
                raise first.error
        return voting.cast(round_call)

    what = f"vote {ballot.producer!r} on {ballot.partition!r} at epoch {voting.attempt.epoch}"
    try:
        return ctx.call(body, what=what, request_id=ballot.request_id, find=voting.find, started=call)
    except EpochsError as exc:
        return exc
