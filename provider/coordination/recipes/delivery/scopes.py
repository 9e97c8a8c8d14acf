"""Delivery scopes: listing them, the floor they set for compaction, and retiring a scope that nobody
delivers any more.

Compaction stops below the lowest delivery cursor (:func:`delivery_floor`, handed to retention as
this family's :data:`COMPACTION`): a deliverer
reads each seal from ZooKeeper, so a scope whose triggerer is gone for good would hold every later
compaction back. :func:`retire_delivery_scope` removes such a scope (``asset-events/<scope>`` with
its cursors) in one transaction, after which compaction proceeds past it.

A scope is refused while a deliverer holds it: a claim under it (an ephemeral node of a deliverer's
live session) means a seal is being delivered right now. The transaction deletes the scope node
itself, which ZooKeeper refuses while any child is left, so a claim taken between the check and the
commit makes the whole transaction fail (nothing deleted) and the check runs again. Retire a scope
only once its watchers are gone: a deliverer started under it afterwards begins again at its
``from_epoch``.
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import StateError
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.paths import child_path
from airflow_epochs.coordination.base.steps import Delete, Step
from airflow_epochs.coordination.protocol.retention import CompactionStep
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths, cursor_partition, is_sent_marker
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor, RetiredScope
from airflow_epochs.coordination.recipes.delivery.rewinds import cursors, read_rewinds, trim_rewinds
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.retired_partitions import live_partitions
from airflow_epochs.coordination.wire.events import DeliveryScopeRetired
from airflow_epochs.coordination.wire.nodes import PipelineRecord

__all__ = ["COMPACTION", "DeliveryScopeHeld", "RetiredScope", "UnknownDeliveryScope", "delivery_floor",
           "delivery_scopes", "retire_delivery_scope"]

# Scopes an error names at most (a pipeline has one a deployment: a handful).
_SCOPES_SHOWN = 20


class UnknownDeliveryScope(StateError):
    """The pipeline has no delivery scope of that name; nothing was written."""


class DeliveryScopeHeld(StateError):
    """A deliverer holds a claim in the scope (it is delivering a seal now); nothing was written."""


def delivery_scopes(ctx: PipelineContext) -> list[str]:
    """The pipeline's delivery scopes, sorted."""
    return ctx.call(lambda call: _scopes(call, ctx), what="list delivery scopes")


def _scopes(call: Call, ctx: PipelineContext) -> list[str]:
    return sorted(call.children(ctx.paths.asset_events) or [])


def retire_delivery_scope(ctx: PipelineContext, scope: str, *, request_id: str | None = None) -> RetiredScope:
    """Remove delivery scope ``scope`` and its cursors, so that compaction is no longer held back by it.

    :param scope: the scope's name (as the watchers were given it); validated before anything is read.
    :param request_id: repeat a call whose answer was lost with its id: it is not applied twice.
    :raises UnknownDeliveryScope: the pipeline has no such scope (the error names it and the scopes
        there are); nothing was written.
    :raises DeliveryScopeHeld: a deliverer holds a claim in it now; nothing was written.
    """
    path = DeliveryPaths(ctx.paths).scope(validate_name("owner", scope))

    def body(call: Call) -> RetiredScope:
        ctx.record(call)  # PipelineNotFound before anything else
        stat = call.exists(path)
        if stat is None:
            known = _scopes(call, ctx)
            listed = ", ".join(repr(s) for s in known[:_SCOPES_SHOWN]) + (" ..." if len(known) > _SCOPES_SHOWN else "")
            raise UnknownDeliveryScope(
                f"pipeline {ctx.pipeline!r} has no delivery scope {scope!r} (its scopes: {listed or 'none'}); "
                "nothing was written")
        children = call.children(path) or []
        claims = sorted(name for name in children if cursor_partition(name) is None and not is_sent_marker(name))
        if claims:
            stats = call.exists_many([child_path(path, name) for name in claims])
            if any(found is None for found in stats):
                raise Conflict()  # a claim went meanwhile: look again
            owners = sorted({f"session 0x{int(found.ephemeralOwner):x}" if found.ephemeralOwner else "no session"
                             for found in stats})
            raise DeliveryScopeHeld(
                f"delivery scope {scope!r} of pipeline {ctx.pipeline!r} is held: {len(claims)} claim(s) "
                f"(first {claims[0]!r}) by {', '.join(owners)}; a deliverer is delivering it now. Stop its "
                "watchers (the triggerer of that deployment) and retire it again; nothing was written")
        cursors = sorted(name for name in children if cursor_partition(name) is not None)
        sent = sorted(name for name in children if is_sent_marker(name))
        raws = call.get_many([child_path(path, name) for name in cursors])
        if any(raw is None for raw in raws):
            raise Conflict()
        following = {str(cursor_partition(name)): DeliveryCursor.from_bytes(raw.data, path=child_path(path, name))
                     .following for name, raw in zip(cursors, raws, strict=True) if raw is not None}
        retired = RetiredScope(scope, following)
        steps: list[Step] = [
            *[Delete(child_path(path, name), int(raw.stat.version))
              for name, raw in zip(cursors, raws, strict=True) if raw is not None],
            *[Delete(child_path(path, name)) for name in sent],  # the records of delivered versions
            Delete(path, int(stat.version)),  # refused while any child is left: a claim taken meanwhile
            *ctx.request_op(call, "retire_delivery_scope", retired.to_result()),
            *ctx.event(DeliveryScopeRetired(scope=scope, cursors=following)),
        ]
        failure = call.try_commit(steps)
        if failure is not None:
            if isinstance(failure.error, (BadVersionError, NoNodeError, NotEmptyError)):
                raise Conflict()  # a cursor moved, a claim came or went, or it was retired meanwhile
            raise failure.error
        return retired

    def find(call: Call) -> RetiredScope | None:
        stored = ctx.stored_result(call)
        if stored is None:
            return None
        return RetiredScope.from_result(stored, scope=scope, path=ctx.paths.request(call.request_id))

    return ctx.call(body, what=f"retire delivery scope {scope!r}", request_id=request_id, find=find)


def delivery_floor(call: Call, ctx: PipelineContext) -> int | None:
    """The newest epoch every asset-event delivery cursor is past (None without cursors), each cursor
    read as moved back by the rollbacks its writer had not seen: compaction stops there, since a
    deliverer reads each seal from ZooKeeper, so a triggerer that lags (or is down) finds every seal it
    has not delivered yet. A scope no triggerer delivers any more holds compaction back until its
    ``asset-events/<scope>`` is removed. The cursor of a partition that no configuration names at or
    after its next epoch holds nothing back: no seal of it can come (a partition removed from the
    configuration would otherwise stop compaction for good)."""
    lowest: int | None = None
    record: PipelineRecord | None = None
    rewinds, _version = read_rewinds(call, ctx)
    for _scope, partition, cursor in cursors(call, ctx):
        following = rewinds.position(cursor)
        record = record or ctx.record(call)
        if partition not in live_partitions(call, ctx, record, following - 1):
            continue
        lowest = following if lowest is None else min(lowest, following)
    return None if lowest is None else lowest - 1


# What this family hands retention: compaction stops below the lowest cursor, and the rollbacks every
# cursor has seen are forgotten.
COMPACTION = CompactionStep("delivery", floor=delivery_floor, trim=trim_rewinds)
