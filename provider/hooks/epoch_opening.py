"""Opening an epoch from a task: the leader-aware decision, and the wait in the worker when the task
does not defer (no Airflow import: the caller turns the final decision into a result, a skip or a
deferral).

The decision is :func:`~airflow_epochs.coordination.services.coordinator.open_as_leader`'s; the waits are the
ledger's own, on watches: :meth:`EpochLedger.wait_for_frontier` for the previous epoch or the leader's
lease, and the ledger's backpressure wait for slow consumers, a bounded slice at a time so that the
lease is renewed and the deadline honoured.
"""

from __future__ import annotations

import datetime
import logging
import time

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.services.coordinator import OpenDecision, open_as_leader

_log = logging.getLogger(__name__)

#: Longest backpressure wait inside one decision when waiting in the worker: the lease is renewed at
#: each decision.
BACKPRESSURE_SLICE = 60.0


def describe_wait(decision: OpenDecision) -> str:
    """What a ``wait`` or ``backpressured`` decision waits for, in words (for the task log)."""
    if decision.action == "backpressured":
        return decision.reason or f"epoch {decision.epoch} waits for consumers to acknowledge epoch " \
                                  f"{decision.wait_for_consumers}"
    if decision.leader:
        return (f"{decision.leader} leads; epoch {decision.epoch} waits up to {decision.wait_seconds or 0:.0f} s "
                f"for epoch {decision.wait_for_frontier} to be sealed")
    return f"epoch {decision.epoch} waits for epoch {decision.wait_for_frontier} to be sealed"


def open_epoch(
    ledger: EpochLedger,
    epoch: int,
    *,
    lease_duration: datetime.timedelta,
    request_id: str | None,
    wait_in_worker: bool,
    backpressure_deadline: float | None = None,
    log: logging.Logger = _log,
) -> OpenDecision:
    """Decide whether ``ledger``'s owner opens ``epoch``; with ``wait_in_worker``, wait here and decide
    again until the epoch is ``opened`` or ``sealed`` (or the backpressure deadline passed: the last
    ``backpressured`` decision is returned). Without it, the first decision is returned as it is, and
    the caller waits elsewhere (deferred) on what a ``wait`` or ``backpressured`` decision names.

    :param request_id: the id of this opening: repeating it returns the attempt it opened.
    :param backpressure_deadline: ``time.monotonic()`` after which slow consumers are no longer waited
        for (None: no limit).
    :param log: where each wait is said (a task passes its own log).
    """
    while True:
        slice_ = 0.0
        if wait_in_worker:
            left = None if backpressure_deadline is None else max(0.0, backpressure_deadline - time.monotonic())
            slice_ = BACKPRESSURE_SLICE if left is None else min(BACKPRESSURE_SLICE, left)
        decision = open_as_leader(ledger, epoch, lease_duration=lease_duration, backpressure_wait=slice_ or None,
                                  wait_on_backpressure=True, request_id=request_id)
        if decision.action in ("opened", "sealed"):
            return decision
        log.info("Pipeline %s: %s", ledger.pipeline, describe_wait(decision))
        if not wait_in_worker:
            return decision
        if decision.action == "backpressured":
            if backpressure_deadline is not None and time.monotonic() >= backpressure_deadline:
                return decision
            continue  # the ledger waited a slice on the consumers' watches: decide again
        assert decision.wait_for_frontier is not None  # a "wait" decision names the epoch it waits for
        # a watch on the frontier, for as long as the decision says (None: no limit)
        ledger.wait_for_frontier(decision.wait_for_frontier, timeout=decision.wait_seconds)
