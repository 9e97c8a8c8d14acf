"""Pipelined voting: a process that votes for many producers (a Spark job sealing many partitions,
a worker hosting several producers) sends its votes before it waits for the first answer, on its one
ZooKeeper connection, instead of one blocking call per vote.

Each vote is still its own call: its own request id and deadline, the same steps as
:func:`~.votes.vote` (built by the same :class:`~.votes.Voting`), the same fencing, and its answer
read by the same code. What differs is how the steps travel: the votes of a batch share ONE
transaction (the attempt's fence once, then each vote's steps; up to :data:`_MAX_VOTES_TOGETHER` votes
and :data:`MAX_BYTES_TOGETHER` bytes, more transactions beyond), so ZooKeeper commits them all or none.
A vote whose shared transaction another vote's refusal made fail wrote nothing, and is sent again on
its own; a vote whose answer is lost, or whose round must be decided again, goes on exactly as a
blocking vote does (it looks its request id up, then casts again if nothing committed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_epochs.coordination.base.call import TRANSIENT_ERRORS, Call, SharedAnswer, send_shared
from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.session import validate_request_id
from airflow_epochs.coordination.base.steps import Step
from airflow_epochs.coordination.protocol.seals import EpochSealAhead, producers_of
from airflow_epochs.coordination.protocol.votes import SentVote, Voting
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.coordination.wire.records import Attempt, VoteResult, check_read_versions, check_upstream

# Votes one pipelined batch may carry (each is a transaction in flight on the same connection;
# ZooKeeper's globalOutstandingLimit is 1,000 requests per server).
_MAX_BALLOTS = 512
# Votes sent in one transaction, and the bytes it may carry (ZooKeeper refuses requests over its
# jute.maxbuffer, 1 MB by default; a vote's payload is at most payloads.MAX_PAYLOAD_BYTES).
_MAX_VOTES_TOGETHER = 64
MAX_BYTES_TOGETHER = 512 * 1024


@dataclass(frozen=True)
class Ballot:
    """One vote of a pipelined batch: the arguments of :meth:`~.ledger.EpochLedger.vote`."""

    partition: str
    producer: str
    manifest: Mapping[str, Any] | None = None
    snapshot: Any = None
    upstream: Mapping[str, int] | None = None
    request_id: str | None = None
    read_versions: Mapping[str, int] | None = None


def vote_many(ctx: PipelineContext, attempt: Attempt, ballots: Sequence[Ballot]) -> list[VoteResult | EpochsError]:
    """Cast ``ballots`` under ``attempt``, pipelined; see :meth:`~.ledger.EpochLedger.vote_many`.

    Every ballot is checked (names, manifest, snapshot, lineage, request id, partition and producer
    in the attempt's configuration) before any transaction is sent.
    """
    if not 1 <= len(ballots) <= _MAX_BALLOTS:
        raise InvalidInput(f"vote_many takes 1 to {_MAX_BALLOTS} ballots, not {len(ballots)}")
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
    begun = _send_together(calls, prepared)
    ahead = _seal_ahead(ctx, attempt, version, votings, begun)
    _await_last(ahead, begun)
    begun = _send_rolled_back_alone(votings, reads, begun)
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
    lineage = check_upstream(ballot.upstream, limit=payloads.MAX_UPSTREAM)
    return Voting(ctx, attempt, ballot.partition, ballot.producer, manifest, payloads.check_snapshot(ballot.snapshot),
                  lineage, check_read_versions(ballot.read_versions, lineage, pipeline=ctx.pipeline))


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


_Begun = tuple[Call, "SentVote | _Unsent"]  # a ballot's call and its transaction (sent, or why not)


def _prepare(voting: Voting, call: Call, pointer_read: Any) -> SentVote | _Unsent:
    """Build the vote's transaction. An error here belongs to this ballot alone: the others are sent
    and settled as usual."""
    try:
        return voting.prepare(call, pointer_read)
    except TRANSIENT_ERRORS:
        return _Unsent(None)
    except Exception as exc:  # noqa: BLE001 - answered in the ballot's slot (see _settle)
        return _Unsent(exc)


def _send(call: Call, vote: SentVote | _Unsent) -> _Begun:
    if isinstance(vote, _Unsent):
        return call, vote
    try:
        return call, Voting.sent(call, vote)
    except TRANSIENT_ERRORS:
        return call, _Unsent(None)
    except Exception as exc:  # noqa: BLE001 - answered in the ballot's slot (see _settle)
        return call, _Unsent(exc)


def _send_together(calls: Sequence[Call], prepared: Sequence[SentVote | _Unsent]) -> list[_Begun]:
    """Send the prepared votes in as few transactions as their size allows: one transaction carries
    the attempt's fence once and then each vote's own steps (it commits every vote or none). A vote
    alone in its group is sent as :func:`~.votes.vote` sends it."""
    begun: list[_Begun] = list(zip(calls, prepared, strict=True))
    group: list[int] = []
    size = 0
    for index, vote in enumerate([*prepared, None]):
        weight = sum(len(step.path) + len(getattr(step, "data", b"")) for step in vote.ops) \
            if isinstance(vote, SentVote) else 0
        if group and (vote is None or len(group) == _MAX_VOTES_TOGETHER or size + weight > MAX_BYTES_TOGETHER):
            _send_group(begun, group)
            group, size = [], 0
        if isinstance(vote, SentVote):
            group.append(index)
            size += weight
    return begun


def _send_group(begun: list[_Begun], group: Sequence[int]) -> None:
    """Send the votes at ``group`` (all prepared) in one transaction, or alone if there is one."""
    if len(group) == 1:
        begun[group[0]] = _send(*begun[group[0]])
        return
    votes = [vote for i in group if isinstance(vote := begun[i][1], SentVote)]
    steps: list[Step] = [votes[0].ops[0]]  # every vote's first step is the same fence of the same attempt
    shares: list[list[int]] = []
    for vote in votes:
        shares.append([0, *range(len(steps), len(steps) + len(vote.ops) - 1)])
        steps += vote.ops[1:]
    calls = [begun[i][0] for i in group]
    try:
        answers = send_shared(calls, steps, shares)
    except TRANSIENT_ERRORS:
        for i in group:
            begun[i] = (begun[i][0], _Unsent(None))
        return
    for i, vote, answer in zip(group, votes, answers, strict=True):
        begun[i] = (begun[i][0], replace(vote, pending=answer))


def _send_rolled_back_alone(votings: Sequence[Voting], reads: Sequence[Any], begun: Sequence[_Begun]) -> list[_Begun]:
    """A transaction carrying several votes that one of them made fail (its partition sealed meanwhile,
    a duplicate vote) wrote nothing: that vote is answered by its own refusal, and the others are sent
    again, each in a transaction of its own, pipelined."""
    again: list[_Begun] = []
    resent = False
    for voting, read, (call, sent) in zip(votings, reads, begun, strict=True):
        if isinstance(sent, SentVote) and isinstance(sent.pending, SharedAnswer) and sent.pending.rolled_back():
            call.settle(sent.ops, sent.pending)  # read: nothing of it committed
            again.append(_send(call, _prepare(voting, call, read)))
            resent = True
        else:
            again.append((call, sent))
    if resent:
        _await_last(None, again)
    return again


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
