"""The leader-aware opening of an epoch: what a coordinator (an Airflow task, a script) should do.

Across deployments running the same pipeline, exactly one leads (the lease); the others wait until
the epoch is sealed, or until the leader stops renewing its lease and they take over. This module
turns that protocol into one decision; the caller only carries it out (skip, wait, or work).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Literal

from airflow_epochs.coordination.errors import Backpressured, EpochAlreadySealed, NotLeader
from airflow_epochs.coordination.leadership import LeaderLease, _utcnow
from airflow_epochs.coordination.ledger import Attempt, EpochInfo, EpochLedger, SnapshotRef
from airflow_epochs.coordination.names import validate_epoch


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
    snapshots: dict[str, SnapshotRef] = field(default_factory=dict)
    wait_for_consumers: int | None = None
    reason: str | None = None


def open_as_leader(
    ledger: EpochLedger,
    epoch: int,
    *,
    lease_duration: datetime.timedelta,
    backpressure_wait: float | None = None,
    wait_on_backpressure: bool = False,
) -> OpenDecision:
    """Decide, and if it falls to us, open ``epoch`` as the pipeline's leader.

    Order of the checks: an epoch sealed already is never opened again; epoch e waits for e-1; only
    the lease holder opens (renewing the lease each time); a leader that finds another owner's open
    attempt (its lease ran out) supersedes it. The snapshots a retry starts from are included.

    A backpressure window that holds the epoch back waits up to ``backpressure_wait`` seconds here;
    after that :class:`Backpressured` is raised, or with ``wait_on_backpressure`` a ``backpressured``
    decision is returned so the caller can wait elsewhere (e.g. deferred in Airflow's triggerer).
    """
    validate_epoch(epoch)
    info = ledger.epoch_info(epoch)
    if info is not None and info.state == "sealed":
        return OpenDecision("sealed", epoch, sealed=info)
    if ledger.frontier() < epoch - 1:
        return OpenDecision("wait", epoch, wait_for_frontier=epoch - 1)
    lease = LeaderLease(ledger.client, ledger.pipeline, owner=ledger.owner, root=ledger.paths.root,
                        duration=lease_duration)
    try:
        lease.acquire()
    except NotLeader as standby:
        holder = lease.holder()
        remaining = (holder.until - _utcnow()).total_seconds() if holder else 0.0
        return OpenDecision("wait", epoch, wait_for_frontier=epoch, wait_seconds=max(1.0, remaining + 1.0),
                            leader=standby.holder)
    takeover = info is not None and info.state == "open" and info.owner != ledger.owner
    try:
        attempt = ledger.open_epoch(epoch, takeover=takeover, wait=backpressure_wait)
    except Backpressured as held:
        if not wait_on_backpressure:
            raise
        return OpenDecision("backpressured", epoch, wait_for_consumers=epoch - held.window, reason=str(held))
    except EpochAlreadySealed:
        return OpenDecision("sealed", epoch, sealed=ledger.epoch_info(epoch))
    snapshots: dict[str, SnapshotRef] = {}
    if epoch > 1:
        for partition in ledger.config_for(epoch).config.partitions:
            ref = ledger.last_sealed_snapshot(partition, before_epoch=epoch)
            if ref is not None:
                snapshots[partition] = ref
    return OpenDecision("opened", epoch, attempt=attempt, took_over=info if takeover else None,
                        snapshots=snapshots)
