"""The leader-aware opening of an epoch: what a coordinator (an Airflow task, a script) should do.

Across deployments running the same pipeline, exactly one leads (the lease); the others wait until
the epoch is sealed, or until the leader stops renewing its lease and they take over. This module
turns that protocol into one decision; the caller only carries it out (skip, wait, or work).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Literal

from airflow_epochs.coordination.base.errors import (
    AttemptSuperseded,
    Backpressured,
    CallUnfinished,
    EpochAlreadySealed,
    InvalidInput,
    NotLeader,
    OutcomeUnknown,
    RetryableError,
)
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.base.session import new_request_id, validate_request_id
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.retention import CompactionReport
from airflow_epochs.coordination.wire.records import Attempt, EpochInfo, SnapshotRef

# Epochs one opening compacts at most: retention keeps up without making any opening slow.
COMPACT_PER_OPEN = 2


@dataclass(frozen=True)
class OpenDecision:
    """The outcome of :func:`open_as_leader`.

    ``action`` is ``opened`` (work under ``attempt``), ``sealed`` (someone sealed it: ``sealed`` says
    who; skip the epoch's work), ``wait`` (wait until the frontier reaches ``wait_for_frontier``, at
    most ``wait_seconds`` if set, then decide again), or ``backpressured`` (asked for with
    ``wait_on_backpressure``: wait until every registered consumer acknowledged
    ``wait_for_consumers``, then decide again; ``reason`` names the slowest consumer).
    """

    action: Literal["opened", "sealed", "wait", "backpressured"]
    epoch: int
    attempt: Attempt | None = None
    sealed: EpochInfo | None = None
    wait_for_frontier: int | None = None
    wait_seconds: float | None = None
    leader: str | None = None
    took_over: EpochInfo | None = None
    snapshots: dict[str, dict[str, SnapshotRef]] = field(default_factory=dict)
    wait_for_consumers: int | None = None
    reason: str | None = None
    compaction: CompactionReport | None = None


def open_as_leader(
    ledger: EpochLedger,
    epoch: int,
    *,
    lease_duration: datetime.timedelta,
    backpressure_wait: float | None = None,
    wait_on_backpressure: bool = False,
    request_id: str | None = None,
) -> OpenDecision:
    """Decide, and if it falls to us, open ``epoch`` as the pipeline's leader.

    Order of the checks: an epoch sealed already is never opened again; epoch e waits for e-1 (the
    pipeline's ``first_epoch`` waits for nothing: the frontier starts just below it); only
    the lease holder opens (renewing the lease each time); a leader that finds another owner's open
    attempt (its lease ran out) supersedes it. The snapshots a retry starts from are included (per
    partition, per producer that left one). After opening, the leader compacts at most
    :data:`COMPACT_PER_OPEN` epochs that fell out of the configuration's ``retain_epochs``: the
    coordinator applies retention, and only to sealed epochs far behind the one it just opened.

    :param request_id: the id of this opening (e.g. derived from the Airflow task try): repeating it
        returns the attempt it opened; a new id from the same owner supersedes that attempt.

    A backpressure window that holds the epoch back waits up to ``backpressure_wait`` seconds here;
    after that :class:`Backpressured` is raised, or with ``wait_on_backpressure`` a ``backpressured``
    decision is returned so the caller can wait elsewhere (e.g. deferred in Airflow's triggerer).
    """
    request_id = _checked_arguments(epoch, lease_duration, backpressure_wait, request_id)
    info = ledger.epoch_info(epoch)
    if info is not None and info.state == "sealed":
        return OpenDecision("sealed", epoch, sealed=info)
    if ledger.frontier() < epoch - 1:
        return OpenDecision("wait", epoch, wait_for_frontier=epoch - 1)
    lease = ledger.lease(duration=lease_duration)
    try:
        # The lease carries this opening's request id: an OutcomeUnknown names it, and a repeat with it
        # finds the lease it took instead of asking for it again.
        lease.acquire(request_id=request_id)
    except NotLeader as standby:
        holder = lease.holder()
        remaining = holder.remaining() if holder else 0.0
        return OpenDecision("wait", epoch, wait_for_frontier=epoch, wait_seconds=max(1.0, remaining + 1.0),
                            leader=standby.holder)
    takeover = info is not None and info.state == "open" and info.owner != ledger.owner
    try:
        attempt = ledger.open_epoch(epoch, takeover=takeover, wait=backpressure_wait, request_id=request_id)
    except Backpressured as held:
        if not wait_on_backpressure:
            raise
        return OpenDecision("backpressured", epoch, wait_for_consumers=epoch - held.window, reason=str(held))
    except EpochAlreadySealed:
        return OpenDecision("sealed", epoch, sealed=ledger.epoch_info(epoch))
    if attempt.overtaken is not None:  # a repeat of this request: what it opened is no longer current
        if attempt.overtaken.change == "sealed":
            return OpenDecision("sealed", epoch, sealed=ledger.epoch_info(epoch))
        raise AttemptSuperseded(
            f"pipeline {ledger.pipeline!r}: request {request_id!r} opened attempt {attempt.token} of epoch {epoch}, "
            f"which is {attempt.overtaken}; a new opening needs a new request id",
            attempt=attempt.token, current=int(attempt.overtaken.current or 0),
        )
    step = "reading the snapshots a retry starts from"
    try:
        snapshots = retry_snapshots(ledger, epoch)
        step = "compacting epochs out of retention"
        compaction = ledger.compact(max_epochs=COMPACT_PER_OPEN)
    except (OutcomeUnknown, RetryableError) as exc:
        # The opening committed: never report this call as "nothing was written".
        raise CallUnfinished(
            f"epoch {epoch} of {ledger.pipeline!r} was opened as attempt {attempt.token} under request "
            f"{request_id!r}, then {step} did not "
            f"finish ({type(exc).__name__}); repeat open_as_leader with request_id={request_id!r}: it "
            "answers with this attempt and finishes the rest",
            request_id=request_id,
        ) from exc
    return OpenDecision("opened", epoch, attempt=attempt, took_over=info if takeover else None,
                        snapshots=snapshots, compaction=compaction)


def _checked_arguments(
    epoch: int, lease_duration: datetime.timedelta, backpressure_wait: float | None, request_id: str | None
) -> str:
    """Check every argument before the first write (the lease): a bad one writes nothing. Returns the
    request id of this opening (a fresh one if none was given)."""
    validate_epoch(epoch)
    if not isinstance(lease_duration, datetime.timedelta) or lease_duration.total_seconds() < 1:
        raise InvalidInput(f"lease_duration must be a timedelta of at least 1 s, not {lease_duration!r}")
    if backpressure_wait is not None and (isinstance(backpressure_wait, bool)
                                          or not isinstance(backpressure_wait, (int, float)) or backpressure_wait < 0):
        raise InvalidInput(f"backpressure_wait must be a non-negative number of seconds or None, not "
                           f"{backpressure_wait!r}")
    return new_request_id() if request_id is None else validate_request_id(request_id)


def retry_snapshots(ledger: EpochLedger, epoch: int) -> dict[str, dict[str, SnapshotRef]]:
    """Per partition, per producer: the snapshots a retry of ``epoch`` starts from (none for the
    pipeline's first epoch, whatever its ``first_epoch``: nothing was sealed before it). One pointer
    read per partition, never the epochs in between."""
    snapshots: dict[str, dict[str, SnapshotRef]] = {}
    for partition in ledger.config_for(epoch).config.partitions:
        refs = ledger.last_sealed_snapshots(partition, before_epoch=epoch)
        if refs:
            snapshots[partition] = refs
    return snapshots
