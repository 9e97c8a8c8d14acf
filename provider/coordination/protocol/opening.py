"""Opening epochs: a new epoch, a new attempt at an open one (resumed, taken over, after an abort),
and a rolled-back epoch reopened as a new generation.

Every opening is one multi-op transaction guarded by znode versions. Its request id goes into the
new attempt node (``a-<token>``), which is never rewritten except to change its state, so a repeat
of the request finds the attempt it opened and answers with it, flagged (:class:`Overtaken`) when
it has been superseded, aborted, rolled back or sealed since.

A new epoch opens in two requests on the happy path: one read of the pipeline record, one
transaction that checks the previous epoch's seal exists (so epochs open in order) and bumps the
record's version (so openings, configuration changes and rollbacks serialise). A takeover checks the
epoch's seal counter, so it never prepares votes for a partition the old attempt sealed meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import Call, Conflict, commit_or_conflict
from airflow_epochs.coordination.base.errors import (
    Backpressured,
    CorruptPayload,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochNotOpen,
    EpochOutOfOrder,
)
from airflow_epochs.coordination.base.names import check_attempt_token, validate_epoch
from airflow_epochs.coordination.base.paths import parse_attempt_key
from airflow_epochs.coordination.base.steps import Check, Create, Failure, SetData, Step, first_failure
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import (
    attempt_overtaken,
    attempt_record,
    consumer_acks,
    epoch_record,
    frontier,
)
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.coordination.wire.events import AttemptStarted, EpochOpened
from airflow_epochs.coordination.wire.nodes import AttemptNode, EpochNode, PipelineRecord
from airflow_epochs.coordination.wire.records import Attempt


def open_epoch(
    ctx: PipelineContext,
    epoch: int,
    *,
    takeover: bool = False,
    request_id: str | None = None,
    on_consumer_change: Callable[[], None] | None = None,
) -> Attempt:
    """Open ``epoch`` (or answer with the attempt this request opened); see ``EpochLedger.open_epoch``."""
    validate_epoch(epoch)
    opening = Opening(ctx, epoch, takeover=takeover, on_consumer_change=on_consumer_change)
    return ctx.call(opening.body, what=f"open epoch {epoch} of {ctx.pipeline!r}", request_id=request_id,
                    find=lambda call: _find_opening(call, ctx, epoch))


def _find_opening(call: Call, ctx: PipelineContext, epoch: int) -> Attempt | None:
    """The attempt this call's request id opened for this owner, flagged if it is no longer current;
    None if the request opened none (or the epoch is compacted: its attempts are gone).

    A request id is this owner's: two deployments running the same DAG derive the same id from the
    same run and try, and the standby's takeover must supersede the stopped leader's attempt, not
    answer with it (that would leave both deployments on one fencing token, each sealing "its" epoch).
    """
    names = call.children(ctx.paths.epoch(epoch))
    if not names:
        return None
    for token in sorted((t for t in map(parse_attempt_key, names) if t is not None), reverse=True):
        found = attempt_record(call, ctx, epoch, token)
        if found is None or (found.record.request, found.record.owner) != (call.request_id, ctx.owner):
            continue
        current = epoch_record(call, ctx, epoch)
        if current is None:
            return None
        return _attempt_handle(ctx, call, epoch, token, current.record, found.record)
    return None


def _attempt_handle(ctx: PipelineContext, call: Call, epoch: int, token: int, epoch_node: EpochNode,
                   attempt_node: AttemptNode | None = None) -> Attempt:
    """The handle of attempt ``token``, with :class:`Overtaken` set unless it is the running one."""
    if attempt_node is None:
        return Attempt(ctx.pipeline, epoch, token, epoch_node.owner, epoch_node.config_version, epoch_node.generation,
                       call.request_id, epoch_node.opened_at, ctx.session.session_id,
                       overtaken=attempt_overtaken(token, epoch_node.generation, epoch_node, None))
    generation = epoch_node.generation if attempt_node.generation is None else attempt_node.generation
    # an attempt of an earlier opening (before a rollback) keeps that opening's configuration and start
    same_opening = generation == epoch_node.generation
    config_version = epoch_node.config_version if same_opening or attempt_node.config_version is None \
        else attempt_node.config_version
    opened_at = epoch_node.opened_at if same_opening else attempt_node.started_at
    return Attempt(ctx.pipeline, epoch, token, attempt_node.owner, config_version, generation, attempt_node.request,
                   opened_at, ctx.session.session_id,
                   overtaken=attempt_overtaken(token, generation, epoch_node, attempt_node))


class Opening:
    """One ``open_epoch`` call: each round reads, decides on one of the openings, and commits it."""

    def __init__(self, ctx: PipelineContext, epoch: int, *, takeover: bool,
                 on_consumer_change: Callable[[], None] | None) -> None:
        self.ctx = ctx
        self.paths = ctx.paths
        self.epoch = epoch
        self.takeover = takeover
        self.on_consumer_change = on_consumer_change
        self.rounds = 0

    def body(self, call: Call) -> Attempt:
        self.rounds += 1
        known = self.ctx.known_record
        # First round of an opening that follows this context's own: try it on the record as written
        # then (no read); any change since makes the transaction fail, and the next round reads.
        optimistic = self.rounds == 1 and known is not None and self.epoch == known.newest_epoch + 1
        record = known if optimistic and known is not None else self.ctx.record(call)
        if self.epoch <= record.compacted_through:
            raise EpochAlreadySealed(
                f"pipeline {self.ctx.pipeline!r}: epoch {self.epoch} is sealed and compacted (its attempts are gone, "
                f"so whether request {call.request_id!r} ever opened one is no longer on record)"
            )
        if self.epoch > record.newest_epoch:
            opened = self.open_new(call, record)
            if opened is not None:
                return opened
        return self.open_existing(call, record)

    # -- the steps -------------------------------------------------------------------------------

    def open_new(self, call: Call, record: PipelineRecord) -> Attempt | None:
        """The happy path: epoch = newest + 1, assumed never opened before (else None: the slow path)."""
        if self.epoch != record.newest_epoch + 1:
            raise self.out_of_order(call, record)
        version = self.ctx.config_for(call, self.epoch, record)
        node = EpochNode("open", 1, self.ctx.owner, version.version, 1, self.ctx.clock())
        epoch_step = Create(self.paths.epoch(self.epoch), node.to_bytes())
        ops = self.opening_ops(call, record, version, node, epoch_step)
        results = call.commit(ops)
        failure = first_failure(ops, results)
        if failure is None:
            # the record bump is the first step: its new version is what this context knows now
            self.ctx.known_record = replace(record, newest_epoch=self.epoch, version=int(results[0].version))
            return _attempt_handle(self.ctx, call, self.epoch, 1, node)
        self.ctx.known_record = None
        if failure.step is epoch_step and isinstance(failure.error, NodeExistsError):
            return None  # opened before and rolled back: reopen it as a new generation
        self.opening_failed(call, record, failure)
        return None  # pragma: no cover - opening_failed always raises

    def open_existing(self, call: Call, record: PipelineRecord) -> Attempt:
        found = epoch_record(call, self.ctx, self.epoch)
        if found is None:
            raise CorruptPayload(f"{self.paths.epoch(self.epoch)}: epoch {self.epoch} <= newest "
                                 f"{record.newest_epoch} is missing")
        node, stat = found
        token = node.attempt
        current = attempt_record(call, self.ctx, self.epoch, token)
        if node.state == "sealed":
            raise EpochAlreadySealed(
                f"pipeline {self.ctx.pipeline!r}: epoch {self.epoch} is sealed (attempt {token} by {node.owner!r}); "
                "only a recorded rollback can reopen it; nothing was written"
            )
        if node.state == "rolled_back":
            return self.reopen(call, record, node, stat.version)
        if current is None:
            raise CorruptPayload(f"{self.paths.attempt(self.epoch, token)}: the current attempt of epoch "
                                 f"{self.epoch} is missing")
        mine = (current.record.request, current.record.owner) == (call.request_id, self.ctx.owner)
        if current.record.state == "running" and mine:
            # This request already opened it: another process with the same request id committed between
            # our look-up and our commit. The answer is that attempt; a new one would fence off its votes.
            return _attempt_handle(self.ctx, call, self.epoch, token, node, current.record)
        if current.record.state == "running" and node.owner != self.ctx.owner and not self.takeover:
            raise EpochAlreadyOpen(
                f"pipeline {self.ctx.pipeline!r}: epoch {self.epoch} is open under attempt {token} of "
                f"{node.owner!r}; nothing was written",
                owner=node.owner, attempt=token,
            )
        return self.supersede(call, node, stat.version, current)

    def supersede(self, call: Call, node: EpochNode, version_no: int, current: Found[AttemptNode]) -> Attempt:
        """A new attempt: the old one was aborted, or it is superseded (a takeover, or this owner
        starting over: a same-named replacement never shares a possible zombie's token)."""
        token = node.attempt
        new_token = check_attempt_token(self.ctx.pipeline, self.epoch, token + 1)
        version = self.ctx.config(call, node.config_version)
        generation = node.generation
        # The seal counter's version pins the set of sealed partitions read here: a partition the old
        # attempt seals meanwhile makes this transaction fail, so no vote counter is prepared for it.
        counter = call.exists(self.paths.seals(self.epoch, generation))
        sealed = set(call.children(self.paths.seals(self.epoch, generation)) or [])
        new_node = replace(node, attempt=new_token, owner=self.ctx.owner)
        old_path = self.paths.attempt(self.epoch, token)
        fence_old: Step = Check(old_path, current.stat.version)
        if current.record.state == "running":
            superseded = replace(current.record, state="superseded", superseded_by=new_token,
                                 changed_by=call.request_id)
            fence_old = SetData(old_path, superseded.to_bytes(), current.stat.version)
        ops: list[Step] = [
            fence_old,
            SetData(self.paths.epoch(self.epoch), new_node.to_bytes(), version_no),
            *([Check(self.paths.seals(self.epoch, generation), counter.version)] if counter is not None else []),
            *self.attempt_ops(call, new_token, version, generation, created=sealed),
            *self.ctx.event(AttemptStarted(epoch=self.epoch, attempt=new_token, owner=self.ctx.owner,
                            superseded=token, previous_state=current.record.state, generation=generation)),
        ]
        commit_or_conflict(call, ops)
        return _attempt_handle(self.ctx, call, self.epoch, new_token, new_node)

    def reopen(self, call: Call, record: PipelineRecord, node: EpochNode, version_no: int) -> Attempt:
        """A rolled-back epoch opens again as a new generation, in order, under today's configuration."""
        if self.epoch != record.newest_epoch + 1:
            raise self.out_of_order(call, record)
        version = self.ctx.config_for(call, self.epoch, record)
        generation = node.generation + 1
        token = check_attempt_token(self.ctx.pipeline, self.epoch, node.attempt + 1)
        new_node = EpochNode("open", token, self.ctx.owner, version.version, generation, self.ctx.clock())
        epoch_step = SetData(self.paths.epoch(self.epoch), new_node.to_bytes(), version_no)
        failure = call.try_commit(self.opening_ops(call, record, version, new_node, epoch_step))
        if failure is None:
            return _attempt_handle(self.ctx, call, self.epoch, token, new_node)
        self.opening_failed(call, record, failure)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- shared pieces ---------------------------------------------------------------------------

    def opening_ops(
        self, call: Call, record: PipelineRecord, version: ConfigVersion, node: EpochNode, epoch_step: Step
    ) -> list[Step]:
        """A new opening (first or after a rollback): record bump, order check, backpressure checks,
        the epoch record, the attempt, the seal counter and the history record."""
        token, generation = node.attempt, node.generation
        ops: list[Step] = [SetData(self.paths.base, record.to_bytes(newest_epoch=self.epoch), record.version)]
        if self.epoch - 1 > record.compacted_through:  # a compacted epoch is sealed by definition
            ops.append(Check(self.paths.epoch_seal(self.epoch - 1)))
        ops += [
            *self.backpressure(call, version),
            epoch_step,
            *self.attempt_ops(call, token, version, generation, created=()),
            Create(self.paths.seals(self.epoch, generation)),
            *self.ctx.event(EpochOpened(epoch=self.epoch, attempt=token, owner=self.ctx.owner,
                            config_version=version.version, generation=generation)),
        ]
        return ops

    def opening_failed(self, call: Call, record: PipelineRecord, failure: Failure) -> None:
        """Why an opening transaction failed, matched by the step that failed: raises the answer."""
        step, error = failure.step, failure.error
        if isinstance(step, SetData) and step.path == self.paths.base and isinstance(error, BadVersionError):
            raise Conflict()  # another opening, configuration change or rollback came first
        if isinstance(step, Check) and step.path == self.paths.epoch_seal(self.epoch - 1) \
                and isinstance(error, NoNodeError):
            raise self.out_of_order(call, record)
        if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
            raise Conflict()  # a consumer acknowledged meanwhile: decide again
        raise error

    def attempt_ops(
        self, call: Call, token: int, version: ConfigVersion, generation: int, *, created: Any
    ) -> list[Step]:
        """The attempt node (with the request id and the opening it belongs to) and a vote counter for
        each partition of several producers still to seal (not those in ``created``)."""
        attempt = AttemptNode(token, self.ctx.owner, self.ctx.clock(), call.request_id, "running", generation,
                              version.version)
        ops: list[Step] = [Create(self.paths.attempt(self.epoch, token), attempt.to_bytes())]
        for partition, producers in version.config.partitions.items():
            if partition not in created and len(producers) > 1:
                ops.append(Create(self.paths.vote_counter(self.epoch, token, partition)))
        return ops

    def out_of_order(self, call: Call, record: PipelineRecord) -> EpochOutOfOrder:
        now_frontier = frontier(call, self.ctx)
        still_open = f" (epoch {now_frontier + 1} is open and must be sealed first)" \
            if record.newest_epoch > now_frontier else ""
        return EpochOutOfOrder(
            f"pipeline {self.ctx.pipeline!r}: cannot open epoch {self.epoch}: the frontier is {now_frontier}, so the "
            f"next epoch to open is {now_frontier + 1}{still_open}; nothing was written"
        )

    def backpressure(self, call: Call, version: ConfigVersion) -> list[Step]:
        """Checks that keep the opening within the window of the slowest consumer (or Backpressured)."""
        window = version.config.window
        if window is None:
            return []
        watch = self.on_consumer_change
        acks = consumer_acks(call, self.ctx, (lambda _event: watch()) if watch is not None else None)
        if not acks:
            return []
        slowest = min(acks, key=lambda name: acks[name][0])
        acked = acks[slowest][0]
        if self.epoch > acked + window:
            raise Backpressured(
                f"pipeline {self.ctx.pipeline!r}: epoch {self.epoch} waits for consumer {slowest!r}, which "
                f"acknowledged epoch {acked}; the window is {window}, so epochs up to {acked + window} may open; "
                "nothing was written",
                consumer=slowest, acked=acked, window=window,
            )
        # The opening fails if any consumer's acknowledgement (or registration) changes meanwhile.
        return [Check(self.ctx.paths.consumer(name), v) for name, (_, v) in acks.items()]


def current_attempt(ctx: PipelineContext, epoch: int) -> Attempt:
    """The epoch's current attempt (to hand it to another process); raises if it is not open."""
    validate_epoch(epoch)

    def body(call: Call) -> Attempt:
        found = epoch_record(call, ctx, epoch)
        if found is None:
            if ctx.record(call).compacted_through >= epoch:
                raise EpochAlreadySealed(f"pipeline {ctx.pipeline!r}: epoch {epoch} is sealed (and compacted)")
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {epoch} has not been opened")
        node = found.record
        if node.state != "open":
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {epoch} is {node.state}, not open")
        att = attempt_record(call, ctx, epoch, node.attempt)
        return Attempt(ctx.pipeline, epoch, node.attempt, node.owner, node.config_version, node.generation,
                       att.record.request if att else "", node.opened_at, None)

    return ctx.call(body, what=f"read the current attempt of epoch {epoch}")
