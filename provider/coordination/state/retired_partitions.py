"""Removed partitions leave ZooKeeper for the archive: what a pipeline keeps there stays bounded by the
partitions of its live configurations, not by every partition it ever had.

A partition is *live* while some configuration version in force at an epoch after the compaction
point (opened, to be opened again after a rollback, or scheduled) names it. Once it is not, nothing can seal
it again at an epoch ZooKeeper still holds, so its snapshot pointer (``snapshots/<partition>``) and
its entry in the compaction summary's ``lineage`` map are frozen. With an archive, compaction moves
both to one immutable file in the pipeline's storage::

    <archive>/<pipeline>/_partitions/<partition>/retired-<epoch, 12 digits>.json

named by the compaction point the retirement ran to (``retiring`` in the summary, fixed before any
file is written, so a retry after a crash writes the same names). Two lines
(:class:`.compaction_record.RetiredPartition`): the record
``{"kind": "retired_partition", "format": 1, "pipeline", "partition", "retired_through", "pointer":
{"current", "previous"} | null, "lineage": {"epoch", "upstream"} | null}`` and ``{"kind": "end",
"sha256"}`` (the first line's digest: a cut-short file is refused). A partition removed, added back
and removed again has one file per retirement; reads use the newest.

Order, as for epochs: the files are written (or, found, verified to agree), then one transaction per
batch deletes the pointers (version-checked) and rewrites the summary without their lineage
entries; the last one also moves ``partitions_through`` to the retirement's epoch. A crash between
the two is finished by the next compaction, which finds ``retiring`` set and repeats it.

A pointer that names an epoch compacted without an archive (kept in full in ZooKeeper) stays: it is
what keeps that epoch's snapshot readable. Pipelines without an archive shed nothing (docs: retention).
"""

from __future__ import annotations

from dataclasses import replace

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.base.names import MAX_EPOCH
from airflow_epochs.coordination.base.steps import Delete, SetData, Step, first_failure
from airflow_epochs.coordination.base.znode import Znode
from airflow_epochs.coordination.state.archive import ArchiveMismatch, archive_location, archive_locations
from airflow_epochs.coordination.state.archive_storage import read_stored, stored_names, write_stored_once
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.compaction_record import CompactionSummary, RetiredPartition
from airflow_epochs.coordination.wire.nodes import PipelineRecord, SnapshotPointerNode

_PARTITIONS_DIR = "_partitions"
_PREFIX, _SUFFIX = "retired-", ".json"
# Partitions retired per transaction: each is one version-checked delete, plus the summary.
_RETIRE_BATCH = 200


def retired_file(pipeline: str, partition: str, through: int) -> str:
    """The file of one retirement of ``partition``, relative to an archive location."""
    return f"{_partition_folder(pipeline, partition)}/{_PREFIX}{through:012d}{_SUFFIX}"


def _partition_folder(pipeline: str, partition: str) -> str:
    return f"{pipeline}/{_PARTITIONS_DIR}/{partition}"


def newest_retired(call: Call, ctx: PipelineContext, partition: str) -> RetiredPartition | None:
    """The newest retirement of ``partition`` in any archive location the pipeline ever named, or None.

    One folder listing per location (the partition's retirements: one per time it was removed), then
    one file read, cached per client (the files never change). A partition every configuration version
    names was never retired: storage is not asked (one read of the pipeline record, configurations
    cached), so its reads do not depend on the archive being reachable."""
    configs = ctx.record(call).configs
    if configs and all(partition in ctx.config(call, version).config.partitions for version, _ in configs):
        return None
    newest: tuple[int, str] | None = None
    for location in archive_locations(call, ctx):
        for name in stored_names(location, _partition_folder(ctx.pipeline, partition)):
            digits = name[len(_PREFIX):-len(_SUFFIX)]
            named = name.startswith(_PREFIX) and name.endswith(_SUFFIX) and digits.isdigit() and len(digits) == 12
            if named and (newest is None or int(digits) > newest[0]):
                newest = (int(digits), location)
    if newest is None:
        return None
    through, location = newest
    key = f"retired:{location}:{ctx.pipeline}:{partition}:{through}"
    cached = ctx.session.cache.get(key)
    if isinstance(cached, RetiredPartition):
        return cached
    relative = retired_file(ctx.pipeline, partition, through)
    raw = read_stored(location, relative)
    if raw is None:
        return None
    record = RetiredPartition.from_bytes(raw, where=f"{location.rstrip('/')}/{relative}")
    if record.partition != partition or record.retired_through != through:
        raise CorruptPayload(f"{location.rstrip('/')}/{relative}: holds {record.partition!r} retired at "
                             f"{record.retired_through}")
    ctx.session.cache[key] = record
    return record


# -- which partitions are live -------------------------------------------------------------------


def versions_in_force(record: PipelineRecord, after: int, through: int) -> set[int]:
    """The configuration versions in force at some epoch in ``(after, through]`` (a version superseded
    before it took effect may be included: callers treat the answer as a superset)."""
    starts = sorted(record.configs, key=lambda item: (item[1], item[0]))
    found: set[int] = set()
    for index, (version, from_epoch) in enumerate(starts):
        until = starts[index + 1][1] - 1 if index + 1 < len(starts) else None
        if from_epoch <= through and (until is None or until > after):
            found.add(version)
    return found


def partitions_of(call: Call, ctx: PipelineContext, versions: set[int]) -> set[str]:
    return {name for version in versions for name in ctx.config(call, version).config.partitions}


def live_partitions(call: Call, ctx: PipelineContext, record: PipelineRecord, after: int) -> set[str]:
    """The partitions of every configuration version in force at some epoch after ``after``: those
    opened (up to the newest epoch), those a rollback may open again and those scheduled. At most 256 per
    such version (``MAX_PARTITIONS``)."""
    return partitions_of(call, ctx, versions_in_force(record, after, MAX_EPOCH))


# -- retiring ------------------------------------------------------------------------------------


def retire(call: Call, ctx: PipelineContext) -> tuple[str, ...]:
    """Move the partitions no live configuration names out of ZooKeeper into the archive (the step of
    a compaction after its epochs are archived); returns the partitions this call retired."""
    raw = call.get(ctx.paths.archive)
    if raw is None:
        return ()
    summary = CompactionSummary.from_bytes(raw.data, path=ctx.paths.archive)
    version = int(raw.stat.version)
    record = ctx.record(call)
    start = summary.partitions_through
    target = summary.retiring if summary.retiring is not None else record.compacted_through
    if target <= start:
        return ()
    location = archive_location(call, ctx, target)
    if location is None:  # without storage removed partitions stay where they are
        return ()
    removed = sorted(partitions_of(call, ctx, versions_in_force(record, start, target))
                     - live_partitions(call, ctx, record, target))
    pointers = call.get_many([ctx.paths.snapshot_pointer(name) for name in removed])
    leaving: list[tuple[str, Znode | None]] = []
    records: list[RetiredPartition] = []
    for name, pointer_raw in zip(removed, pointers, strict=True):
        pointer = None if pointer_raw is None else \
            SnapshotPointerNode.from_bytes(pointer_raw.data, path=ctx.paths.snapshot_pointer(name))
        lineage = summary.lineage.get(name)
        if pointer is None and lineage is None:
            continue  # nothing in ZooKeeper (never sealed a snapshot or a lineage vector, or retired already)
        if pointer is not None and any(archive_location(call, ctx, place.epoch) is None
                                       for place in (pointer.current, pointer.previous) if place is not None):
            continue  # it names an epoch kept in full without an archive: the pointer keeps it readable
        records.append(RetiredPartition(name, target, pointer, lineage))
        leaving.append((name, pointer_raw))
    if not removed and summary.retiring is None:
        return ()  # nothing left any configuration: no write (the range is read again next time, from cache)
    if records and summary.retiring is None:  # the name of this retirement's files, fixed before any is written
        summary = replace(summary, retiring=target)
        version = _commit(call, [SetData(ctx.paths.archive, summary.to_bytes(), version)])
    for retired in records:
        write_or_verify(location, ctx.pipeline, retired)
    lineage_left = dict(summary.lineage)
    snapshots_left = dict(summary.snapshots)  # the retired pointer's current is that snapshot or a newer one
    batches = [leaving[i:i + _RETIRE_BATCH] for i in range(0, len(leaving), _RETIRE_BATCH)] or [[]]
    for index, batch in enumerate(batches):
        for name, _ in batch:
            lineage_left.pop(name, None)
            snapshots_left.pop(name, None)
        done = index == len(batches) - 1
        summary = replace(summary, lineage=dict(lineage_left), snapshots=dict(snapshots_left),
                          partitions_through=target if done else start, retiring=None if done else target)
        ops: list[Step] = [Delete(ctx.paths.snapshot_pointer(name), int(pointer_raw.stat.version))
                           for name, pointer_raw in batch if pointer_raw is not None]
        ops.append(SetData(ctx.paths.archive, summary.to_bytes(), version))
        version = _commit(call, ops)
    return tuple(name for name, _ in leaving)


def _commit(call: Call, ops: list[Step]) -> int:
    """Commit ``ops`` (the summary's SetData last); the summary's new version, or :class:`Conflict`."""
    results = call.commit(ops)
    if first_failure(ops, results) is not None:
        raise Conflict()
    return int(results[-1].version)


def write_or_verify(location: str, pipeline: str, record: RetiredPartition) -> None:
    """Write the retirement file once; a file already there (a retry) must hold the same bytes."""
    relative = retired_file(pipeline, record.partition, record.retired_through)
    content = record.to_bytes(pipeline)
    if write_stored_once(location, relative, content):
        return
    found = read_stored(location, relative)
    if found != content:
        raise ArchiveMismatch(f"{location.rstrip('/')}/{relative}: differs from what ZooKeeper holds of "
                              f"partition {record.partition!r}")
