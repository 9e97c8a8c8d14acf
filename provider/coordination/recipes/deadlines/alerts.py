"""Late alerts of compacted epochs: pruned from ZooKeeper, kept in the archive.

Retention removes the ``late-alerts/`` node of every alert whose epoch it compacted, so the folder
does not grow with the pipeline's past. An alert still owed a delivery (not marked delivered) or
being delivered right now (its ephemeral ``,run`` node exists) stays: the delete is one transaction
that creates and deletes the run node beside it, so it fails if a watcher holds the delivery, and it
is guarded by the alert's version, so it fails if the alert changed since it was read.

With an ``archive`` location the alert, as it stands when pruned, is first written to
``<archive>/<pipeline>/_late-alerts/<name>,v<version>.json`` (write-once; a later version of the
same alert, after a cut-short compaction, gets its own file, and the highest version answers), so
"was it late, by how much, who was missing" stays answerable after compaction. Without an archive
the alert goes with the rest of the epoch's record.
"""

from __future__ import annotations

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.paths import child_path, epoch_key
from airflow_epochs.coordination.base.steps import Create, Delete
from airflow_epochs.coordination.recipes.deadlines.records import LateAlert
from airflow_epochs.coordination.state.archive import archive_location
from airflow_epochs.coordination.state.archive_storage import read_stored, stored_names, write_stored_once
from airflow_epochs.coordination.state.pipeline import PipelineContext

_FOLDER = "_late-alerts"
_RUN = ",run"


def _folder(pipeline: str) -> str:
    return f"{pipeline}/{_FOLDER}"


def _alert_epoch(name: str) -> int | None:
    """The epoch of an alert node's name (``<epoch>,<generation>,<partition>``), None for a run node."""
    if name.endswith(_RUN):
        return None
    head = name.split(",", 1)[0]
    return int(head) if head.isdigit() else None


def prune_alerts(call: Call, ctx: PipelineContext, through: int) -> tuple[int, int]:
    """Remove the delivered alerts of epochs up to ``through`` (compacted), archiving each first
    where the configuration names an archive; returns (pruned, archived)."""
    names = call.children(ctx.paths.late_alerts) or []
    present = set(names)
    due = [n for n in names if (e := _alert_epoch(n)) is not None and e <= through and n + _RUN not in present]
    paths = [child_path(ctx.paths.late_alerts, n) for n in due]
    pruned = archived = 0
    for name, path, raw in zip(due, paths, call.get_many(paths), strict=True):
        if raw is None:
            continue
        alert = LateAlert.from_bytes(raw.data, path=path)
        if alert.delivered_at is None:
            continue  # a watcher still owes its callback: it stays until delivered
        location = archive_location(call, ctx, alert.epoch)
        if location is not None:
            relative = f"{_folder(ctx.pipeline)}/{name},v{int(raw.stat.version)}.json"
            if write_stored_once(location, relative, raw.data):
                archived += 1
        run = path + _RUN
        # Create-and-delete the run node: fails, deleting nothing, if a watcher holds the delivery.
        if call.try_commit([Create(run), Delete(run), Delete(path, int(raw.stat.version))]) is None:
            pruned += 1
    return pruned, archived


def archived_alert(call: Call, ctx: PipelineContext, epoch: int, generation: int, partition: str) -> LateAlert | None:
    """The alert of ``partition`` at ``epoch`` (opening ``generation``) as archived when retention
    pruned it, or None (none raised, not pruned yet, or no archive)."""
    location = archive_location(call, ctx, epoch)
    if location is None:
        return None
    prefix = f"{epoch_key(epoch)},{int(generation)},{partition},v"
    versions = [int(n[len(prefix):-5]) for n in stored_names(location, _folder(ctx.pipeline))
                if n.startswith(prefix) and n.endswith(".json") and n[len(prefix):-5].isdigit()]
    if not versions:
        return None
    relative = f"{_folder(ctx.pipeline)}/{prefix}{max(versions)}.json"
    raw = read_stored(location, relative)
    return None if raw is None else LateAlert.from_bytes(raw, path=f"{location.rstrip('/')}/{relative}")
