"""Named resource locks (e.g. a partition's output path) over kazoo's Lock, ReadLock and WriteLock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from kazoo.exceptions import LockTimeout as KazooLockTimeout

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import InvalidInput, LockTimeout
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.state.pipeline import PipelineContext

LockMode = Literal["exclusive", "read", "write"]


@contextmanager
def resource_lock(
    ctx: PipelineContext,
    resource: str,
    *,
    mode: LockMode = "exclusive",
    timeout: float = 30.0,
    identifier: str = "",
) -> Iterator[None]:
    """Hold a lock on ``resource`` of the context's pipeline for the ``with`` block (bound to a ledger
    as ``ledger.lock(resource)``).

    :param mode: ``exclusive`` (kazoo Lock), or ``read``/``write`` (kazoo ReadLock/WriteLock: many
        readers or one writer).
    :param timeout: seconds to wait; :class:`LockTimeout` names the resource when it runs out.
    :param identifier: recorded in the lock's contender node (who is waiting or holding).
    """
    path = ctx.paths.lock(resource)
    client, pipeline = ctx.client, ctx.pipeline
    if mode not in ("exclusive", "read", "write"):
        raise InvalidInput(f"lock mode must be 'exclusive', 'read' or 'write', not {mode!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidInput(f"lock timeout must be a positive number of seconds, not {timeout!r}")
    if identifier:
        validate_name("owner", identifier)
    factory = {"exclusive": client.Lock, "read": client.ReadLock, "write": client.WriteLock}[mode]
    lock = factory(path, identifier)
    session = ctx.session

    def take(_call: Call) -> bool:
        # kazoo's recipe finds its own contender node again after a lost answer (uuid prefix).
        try:
            return bool(lock.acquire(timeout=timeout))
        except KazooLockTimeout:
            return False

    if not session.call(take, what=f"lock {resource!r}", timeout=timeout + session.op_timeout):
        holders = session.call(lambda _call: lock.contenders()[:3], what=f"read the holders of {resource!r}")
        raise LockTimeout(
            f"pipeline {pipeline!r}: no {mode} lock on {resource!r} within {timeout:g} s (held by {holders!r})"
        )
    try:
        yield
    finally:
        session.call(lambda _call: lock.release(), what=f"unlock {resource!r}")
