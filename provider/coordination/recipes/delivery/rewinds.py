"""Rollbacks as delivery counts them: every rollback records itself in ``delivery-rewinds``, in its own
transaction, so that a seal the cursor had passed and that a rollback undid is delivered again in its
new generation (a downstream DAG runs again for a rolled-back epoch).

A cursor records how many rollbacks its writer had seen; it reads as moved back to just after the
epoch each unseen rollback went back to (:meth:`~.records.DeliveryRewinds.position`), and a move of the
cursor writes only a higher ``(rollbacks seen, next epoch)`` than the one stored, so a confirmation of
an event read before a rollback never carries the cursor past the new generation. Retention trims the
rollbacks every cursor has seen.
"""

from __future__ import annotations

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.paths import child_path
from airflow_epochs.coordination.base.steps import Create, SetData, Step
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths, cursor_partition
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor, DeliveryRewinds
from airflow_epochs.coordination.state.pipeline import PipelineContext


def read_rewinds(call: Call, ctx: PipelineContext) -> tuple[DeliveryRewinds, int | None]:
    """The rollbacks counted so far and the record's version (None: no rollback yet)."""
    path = DeliveryPaths(ctx.paths).rewinds
    raw = call.get(path)
    return (DeliveryRewinds(), None) if raw is None else (DeliveryRewinds.from_bytes(raw.data, path=path),
                                                          int(raw.stat.version))


def rewind_on_rollback(call: Call, ctx: PipelineContext, to_epoch: int) -> list[Step]:
    """The rollback's part for delivery: count it, with the epoch it goes back to (guarded by the
    record's version: two rollbacks at once are counted both, or one of them is decided again)."""
    rewinds, version = read_rewinds(call, ctx)
    data = rewinds.after(to_epoch).to_bytes()
    path = DeliveryPaths(ctx.paths).rewinds
    return [Create(path, data) if version is None else SetData(path, data, version)]


def cursors(call: Call, ctx: PipelineContext) -> list[tuple[str, str, DeliveryCursor]]:
    """Every delivery cursor of the pipeline: (scope, partition, cursor)."""
    found: list[tuple[str, str, DeliveryCursor]] = []
    for scope in call.children(ctx.paths.asset_events) or []:
        top = child_path(ctx.paths.asset_events, scope)
        names = [name for name in call.children(top) or [] if cursor_partition(name) is not None]
        paths = [child_path(top, name) for name in names]
        for name, path, raw in zip(names, paths, call.get_many(paths), strict=True):
            if raw is not None:
                found.append((scope, str(cursor_partition(name)), DeliveryCursor.from_bytes(raw.data, path=path)))
    return found


def trim_rewinds(call: Call, ctx: PipelineContext, _through: int) -> int:
    """Forget the rollbacks every cursor has seen; returns how many went. Without any cursor nothing is
    trimmed: a deliverer that has not confirmed its first seal yet may still need them."""
    rewinds, version = read_rewinds(call, ctx)
    seen = [cursor.rewinds for _scope, _partition, cursor in cursors(call, ctx)]
    if version is None or not seen:
        return 0
    trimmed = rewinds.trimmed(min(seen))
    gone = len(rewinds.entries) - len(trimmed.entries)
    if gone and call.try_commit([SetData(DeliveryPaths(ctx.paths).rewinds, trimmed.to_bytes(), version)]) is None:
        return gone
    return 0  # a rollback moved first: the next compaction trims
