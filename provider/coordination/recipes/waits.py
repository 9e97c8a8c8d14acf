"""Waiting on a pipeline's watches, for the ledger's blocking calls: the frontier reaching an epoch
(:meth:`~..ledger.EpochLedger.wait_for_frontier`), and backpressure letting a new epoch open
(:meth:`~..ledger.EpochLedger.open_epoch` with ``wait``). Each waits on a watch, woken by the change
itself, never by polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from airflow_epochs.coordination.base.errors import Backpressured, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.protocol import opening
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.nodes import FrontierNode
from airflow_epochs.coordination.wire.records import Attempt


def watch_frontier(client: KazooClient, path: str, callback: Callable[[int], Any]) -> DataWatch:
    """Call ``callback(frontier)`` now and after every change of the frontier node at ``path`` (a
    kazoo DataWatch: it survives reconnects; return ``False`` from the callback to stop)."""

    def on_change(data: bytes | None, _stat: Any) -> Any:
        if data is None:
            return None
        return callback(FrontierNode.from_bytes(data, path=path).epoch)

    return DataWatch(client, path, on_change)


def wait_for_frontier(client: KazooClient, path: str, epoch: int, *, timeout: float | None,
                      frontier: Callable[[], int]) -> int:
    """Block until the frontier at ``path`` reaches ``epoch`` or ``timeout`` seconds pass (None: no
    limit); the frontier then (read through ``frontier`` if the watch never fired)."""
    validate_epoch(epoch)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
        raise InvalidInput(f"timeout must be a non-negative number of seconds or None, not {timeout!r}")
    deadline = None if timeout is None else time.monotonic() + timeout
    reached = threading.Event()
    seen = [-1]

    def on_frontier(value: int) -> bool:
        seen[0] = value
        if value >= epoch:
            reached.set()
            return False  # stop watching
        return True

    watch_frontier(client, path, on_frontier)
    reached.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return seen[0] if seen[0] >= 0 else frontier()


def open_epoch_waiting(ctx: PipelineContext, epoch: int, *, takeover: bool, wait: float | None,
                       request_id: str | None) -> Attempt:
    """:func:`~..protocol.opening.open_epoch`, retried while backpressure refuses it, for up to ``wait``
    seconds (None: refused at once), each retry woken by a change of the consumers."""
    validate_epoch(epoch)
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0):
        raise InvalidInput(f"wait must be a non-negative number of seconds or None, not {wait!r}")
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        changed = threading.Event()
        try:
            return opening.open_epoch(ctx, epoch, takeover=takeover, request_id=request_id,
                                      on_consumer_change=changed.set)
        except Backpressured:
            if deadline is None or time.monotonic() >= deadline:
                raise
            changed.wait(max(0.0, deadline - time.monotonic()))
