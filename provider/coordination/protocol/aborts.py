"""Aborting an attempt: its token can no longer vote; the epoch stays open for a new attempt.

The abort writes its request id into the attempt node (``aborted_by``), a field every later change of
that node (a rollback) keeps, so a repeat of the request finds it whatever happened since. The
transaction also checks the epoch record's version: sealing the epoch, a takeover and a rollback
all rewrite that record, so an abort decided on an open epoch never lands after its seal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from airflow_epochs.coordination.base.call import Call, commit_or_conflict
from airflow_epochs.coordination.base.errors import AttemptSuperseded, EpochAlreadySealed, EpochNotOpen
from airflow_epochs.coordination.base.steps import Check, SetData
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import attempt_record, epoch_record
from airflow_epochs.coordination.wire.events import AttemptAborted
from airflow_epochs.coordination.wire.records import Attempt, Overtaken

MAX_REASON = 500


@dataclass(frozen=True)
class AbortResult:
    """A committed abort. ``overtaken`` is set when the aborted attempt was rolled back since."""

    epoch: int
    attempt: int
    request: str
    overtaken: Overtaken | None = None


def abort_attempt(ctx: PipelineContext, attempt: Attempt, *, reason: str = "", request_id: str | None = None
                  ) -> AbortResult:
    """Abort the current attempt (see ``EpochLedger.abort_attempt``)."""
    path = ctx.paths.attempt(attempt.epoch, attempt.token)
    reason = str(reason)[:MAX_REASON]

    def body(call: Call) -> AbortResult:
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None or att is None:
            if found is None and ctx.record(call).compacted_through >= attempt.epoch:
                raise EpochAlreadySealed(
                    f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed and compacted; attempt "
                    f"{attempt.token} cannot be aborted (and whether request {call.request_id!r} aborted it "
                    "is no longer on record)")
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} "
                               "does not exist; nothing was written")
        node, stat = found
        if node.state == "sealed":
            raise EpochAlreadySealed(
                f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {node.attempt}; attempt "
                f"{attempt.token} cannot be aborted; nothing was written"
            )
        if att.record.state != "running" or node.attempt != attempt.token or node.state != "open":
            raise AttemptSuperseded(
                f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is "
                f"{att.record.state} (the epoch is {node.state} under attempt {node.attempt}); nothing was written",
                attempt=attempt.token, current=node.attempt,
            )
        aborted = replace(att.record, state="aborted", reason=reason, changed_by=call.request_id,
                          aborted_by=call.request_id)
        commit_or_conflict(call, [
            SetData(path, aborted.to_bytes(), att.stat.version),
            Check(ctx.paths.epoch(attempt.epoch), stat.version),  # not sealed, taken over or rolled back
            *ctx.event(AttemptAborted(epoch=attempt.epoch, attempt=attempt.token, owner=attempt.owner,
                       reason=reason)),
        ])
        return AbortResult(attempt.epoch, attempt.token, call.request_id)

    def find(call: Call) -> AbortResult | None:
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        if att is None or att.record.aborted_by != call.request_id:
            return None
        rolled_back = att.record.state == "rolled_back"
        return AbortResult(attempt.epoch, attempt.token, call.request_id,
                           Overtaken("rolled_back") if rolled_back else None)

    return ctx.call(body, what=f"abort attempt {attempt.token} of epoch {attempt.epoch}", request_id=request_id,
                    find=find)
