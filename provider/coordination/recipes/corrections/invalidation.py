"""Invalidation: a correction re-produces exactly the seals that read what it corrected.

A correction starts when the version a user asked for seals (:mod:`.reseal` creates its node, state
``planning``). :func:`advance` then drives it, one step per ZooKeeper transaction, so that a process
killed at any point leaves a state the next :func:`advance` finishes, and never applies a step twice:

1. **plan** (``planning`` -> ``marking``): the stale seals, found from the lineage vectors of the
   newest sealed version of every (epoch, partition) from the origin's epoch to the newest epoch. A
   seal is stale when its vector names (by :func:`~..wire.versions.read_key`) a stale or corrected
   (partition, epoch) and what it read of that input is older than the input's new version: by the
   version its votes say they read (``read_versions``), or, for a seal that does not say (written
   before votes named versions, or by a producer that names none), by when it read (its attempt, or
   its version, started before that version sealed). So an epoch whose attempt opened before a
   re-seal but whose producer read the re-sealed version is not stale. Same-epoch downstream
   partitions and later epochs that read through a snapshot are found alike, transitively, in epoch
   order; the plan is written once, in one compare-and-set, with a ``correction_planned`` event.
2. **mark**: each planned seal gets its next version opened for this correction (once: the version
   entry names the correction), which marks it stale for every reader.
3. producers re-produce the planned seals in plan order (:func:`pending`; a vote out of order is
   refused) and their votes seal them as new versions.
4. **finish** (``marking`` -> ``done``): once every planned seal is re-sealed, the epochs are scanned
   again for seals made meanwhile that read a stale input (new epochs keep opening during a
   correction and may read a stale snapshot: they proceed, and are appended to the plan); when none
   is left, and no epoch still open started before the last re-seal, ``correction_done`` is recorded.

A rollback that re-opens the corrected epoch ends the correction (``rolled_back``): its versions version an
opening that is history, and the epochs after it are re-run anyway.

The frontier never moves: a correction writes no epoch, no seal and no snapshot pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from airflow_epochs.coordination.base.call import Call, commit_or_conflict
from airflow_epochs.coordination.base.steps import SetData, Step
from airflow_epochs.coordination.recipes.corrections.errors import ResealRefused
from airflow_epochs.coordination.recipes.corrections.records import (
    MAX_PLAN,
    CorrectionNode,
    Reseal,
    VersionEntry,
    VersionsNode,
    correction_path,
    corrections_dir,
    partition_read,
    versions_path,
)
from airflow_epochs.coordination.recipes.corrections.reseal import open_derived
from airflow_epochs.coordination.recipes.corrections.versions import (
    LatestLineage,
    correction,
    latest_lineage,
    lineages_at,
    sealed_version,
    versions_node,
)
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record, seal_record
from airflow_epochs.coordination.wire.events import CorrectionDone, CorrectionPlanned

_NOT_YET = 1 << 62  # an input not re-sealed yet: whatever read it read the stale one


@dataclass(frozen=True)
class Resealed:
    """A stale or corrected input as a scan judges its readers: the zxid at which its version of this
    correction sealed and that version's number (both :data:`_NOT_YET` until it seals)."""

    zxid: int
    version: int

    def read_old(self, lineage: LatestLineage, key: str) -> bool:
        """Whether ``lineage`` read this input (lineage key ``key``) older than its re-sealed version."""
        version = lineage.read_versions.get(key)
        return lineage.read_after < self.zxid if version is None else version < self.version


_PENDING = Resealed(_NOT_YET, _NOT_YET)


@dataclass(frozen=True)
class Scan:
    """What a scan of the epochs found: new stale seals (in order), and whether an epoch still open may
    yet seal something that read a stale input."""

    stale: tuple[tuple[int, str], ...]
    unsettled: bool


def _read(ctx: PipelineContext, cid: str) -> tuple[CorrectionNode, int]:
    def run(call: Call) -> tuple[CorrectionNode, int]:
        found = correction(call, ctx, cid)
        if found is None:
            raise ResealRefused(f"pipeline {ctx.pipeline!r}: no correction {cid!r}")
        return found.record, int(found.stat.version)

    return ctx.call(run, what=f"read correction {cid}")


def _resealed_at(call: Call, ctx: PipelineContext, node: CorrectionNode, item: tuple[int, str]) -> Resealed:
    """``item``'s version of this correction as sealed (:data:`_PENDING` if it has not sealed)."""
    found = versions_node(call, ctx, *item)
    entry = None if found is None else next((e for e in found.record.entries if e.correction == node.id), None)
    if entry is None or entry.state != "sealed":
        return _PENDING
    doc = sealed_version(call, ctx, item[0], item[1], entry.version)
    return _PENDING if doc is None else Resealed(doc.zxid, doc.version)


def entries(call: Call, ctx: PipelineContext, node: CorrectionNode) -> list[VersionEntry | None]:
    """Per planned seal, its version of this correction (None: not opened yet), in one pipelined read."""
    paths = [versions_path(ctx.paths, epoch, partition) for epoch, partition in node.plan]
    out: list[VersionEntry | None] = []
    for path, raw in zip(paths, call.get_many(paths), strict=True):
        found = None if raw is None else VersionsNode.from_bytes(raw.data, path=path)
        out.append(None if found is None else next((e for e in found.entries if e.correction == node.id), None))
    return out


def origin_current(call: Call, ctx: PipelineContext, node: CorrectionNode) -> bool:
    """Whether the version ``node`` corrects is of the epoch's current opening (not rolled back since)."""
    epoch, partition, _ = node.origin
    seal = seal_record(call, ctx, epoch, partition)
    found = versions_node(call, ctx, epoch, partition)
    return seal is not None and found is not None and found.record.generation == seal.generation


def _origin_current(ctx: PipelineContext, node: CorrectionNode) -> bool:
    return ctx.call(lambda call: origin_current(call, ctx, node), what=f"read the origin of {node.id}")


def _progress(ctx: PipelineContext, node: CorrectionNode) -> list[VersionEntry | None]:
    return ctx.call(lambda call: entries(call, ctx, node), what=f"read the progress of correction {node.id}")


def _resealed(ctx: PipelineContext, node: CorrectionNode, item: tuple[int, str]) -> Resealed:
    return ctx.call(lambda call: _resealed_at(call, ctx, node, item), what=f"read the re-seal of {item[1]!r}@{item[0]}")


def _open(ctx: PipelineContext, node: CorrectionNode, item: tuple[int, str]) -> bool:
    return ctx.call(lambda call: open_derived(call, ctx, item[0], item[1], node),
                    what=f"open the re-seal of {item[1]!r} at epoch {item[0]}")


def scan(ctx: PipelineContext, node: CorrectionNode) -> Scan:
    """The seals not in ``node``'s plan that read a stale input (see the module docstring), in epoch order."""
    o_epoch, o_partition, _ = node.origin
    sources: dict[tuple[int, str], Resealed] = {}
    newest = ctx.call(lambda call: ctx.record(call).newest_epoch, what="read the newest epoch")
    found: list[tuple[int, str]] = []
    unsettled = False
    for item in ((o_epoch, o_partition), *node.plan):
        sources[item] = _resealed(ctx, node, item)
    last = max((r.zxid for r in sources.values() if r.zxid != _NOT_YET), default=0)
    for epoch in range(o_epoch, newest + 1):
        def run(call: Call, epoch: int = epoch) -> tuple[list[tuple[int, str]], bool]:
            config = ctx.config_for(call, epoch)
            lineages = lineages_at(call, ctx, epoch, sorted(config.config.partitions))
            added: list[tuple[int, str]] = []
            open_before = False
            changed = True
            while changed:
                changed = False
                for partition, lineage in lineages.items():
                    item = (epoch, partition)
                    if item in sources:
                        continue
                    if lineage is None:
                        if _open_before(call, ctx, epoch, last):
                            open_before = True
                        elif (sealed := latest_lineage(call, ctx, epoch, partition)) is not None:
                            # unsealed when the seals were read, sealed now: judged here, or the finishing scan
                            # (which ends once no epoch is open) would miss it
                            lineages[partition] = sealed
                            changed = True
                        continue
                    for key, read_epoch in lineage.upstream.items():
                        read = partition_read(ctx.pipeline, key)
                        source = sources.get((read_epoch, read)) if read is not None else None
                        if source is not None and source.read_old(lineage, key):
                            sources[item] = _PENDING
                            added.append(item)
                            changed = True
                            break
            return added, open_before

        added, open_before = ctx.call(run, what=f"scan epoch {epoch} for seals that read a stale input")
        found += added
        unsettled = unsettled or open_before
    return Scan(tuple(found), unsettled)


def _open_before(call: Call, ctx: PipelineContext, epoch: int, zxid: int) -> bool:
    """Whether ``epoch``'s current attempt started before ``zxid`` (it may read what was stale then)."""
    found = epoch_record(call, ctx, epoch)
    if found is None or found.record.state not in ("open",):
        return False
    attempt = call.exists(ctx.paths.attempt(epoch, int(found.record.attempt)))
    return attempt is not None and int(attempt.czxid) < zxid


def _write(ctx: PipelineContext, node: CorrectionNode, version: int, new: CorrectionNode, event: list[Step]) -> None:
    path, data = correction_path(ctx.paths, node.id), new.to_bytes()

    def run(call: Call) -> bool:
        commit_or_conflict(call, [SetData(path, data, version), *event])
        return True

    def find(call: Call) -> bool | None:  # after a lost answer: the node holds what this write wrote
        raw = call.get(path)
        return True if raw is not None and raw.data == data and int(raw.stat.version) == version + 1 else None

    ctx.call(run, what=f"advance correction {node.id}", find=find)


def advance(ctx: PipelineContext, cid: str, *, max_steps: int | None = None) -> CorrectionNode:
    """Drive correction ``cid`` as far as it goes now (at most ``max_steps`` transactions: None, no limit):
    plan it, open the planned seals' versions, and finish it once they are all re-sealed. Idempotent:
    a repeat (or a process resuming after another was killed) continues where it stopped."""
    steps = 0
    while True:
        node, version = _read(ctx, cid)
        if node.state in ("done", "rolled_back") or (max_steps is not None and steps >= max_steps):
            return node
        if not _origin_current(ctx, node):
            _write(ctx, node, version, replace(node, state="rolled_back", done_at=ctx.clock()),
                   ctx.event(CorrectionDone(epoch=node.origin[0], correction=cid, resealed=0)))
            continue
        if node.state == "planning":
            plan = scan(ctx, node).stale
            if len(plan) > MAX_PLAN:
                raise ResealRefused(f"correction {cid}: {len(plan)} stale seals, at most {MAX_PLAN}")
            _write(ctx, node, version, replace(node, state="marking", plan=plan),
                   ctx.event(CorrectionPlanned(epoch=node.origin[0], correction=cid,
                                               plan=tuple(f"{e}:{p}" for e, p in plan))))
            steps += 1
            continue
        now = _progress(ctx, node)
        opened = False
        for item, entry in zip(node.plan, now, strict=True):
            if entry is None and _open(ctx, node, item):
                steps += 1
                opened = True
                if max_steps is not None and steps >= max_steps:
                    return node
        if opened:
            continue
        if any(entry is None or entry.state != "sealed" for entry in now):
            return node  # waiting for producers (or for another re-seal of a planned seal to finish)
        found = scan(ctx, node)
        if found.stale:
            _write(ctx, node, version, replace(node, plan=(*node.plan, *found.stale)),
                   ctx.event(CorrectionPlanned(epoch=node.origin[0], correction=cid,
                                               plan=tuple(f"{e}:{p}" for e, p in found.stale))))
            steps += 1
            continue
        if found.unsettled:
            return node  # an epoch opened before the last re-seal may still seal a stale read
        _write(ctx, node, version, replace(node, state="done", done_at=ctx.clock()),
               ctx.event(CorrectionDone(epoch=node.origin[0], correction=cid, resealed=len(node.plan))))
        steps += 1


def corrections(ctx: PipelineContext) -> list[CorrectionNode]:
    """Every correction of the pipeline, oldest origin first."""
    def run(call: Call) -> list[CorrectionNode]:
        names = call.children(corrections_dir(ctx.paths)) or []
        out = []
        for name in sorted(names):
            found = correction(call, ctx, name)
            if found is not None:
                out.append(found.record)
        return out

    return ctx.call(run, what="list corrections")


def resume(ctx: PipelineContext) -> list[CorrectionNode]:
    """Advance every correction not done (after a crash, or from a periodic task); returns them as they are now."""
    return [advance(ctx, node.id) for node in corrections(ctx) if node.state not in ("done", "rolled_back")]


def pending(ctx: PipelineContext) -> list[Reseal]:
    """The versions a correction waits for producers to re-produce now: per correction, the first
    planned seal not re-sealed yet (they are re-produced in plan order, which is epoch order)."""
    out: list[Reseal] = []
    for node in corrections(ctx):
        if node.state != "marking":
            continue

        def run(call: Call, node: CorrectionNode = node) -> Reseal | None:
            if not origin_current(call, ctx, node):
                return None  # rolled back: advance() closes it
            for (epoch, partition), entry in zip(node.plan, entries(call, ctx, node), strict=True):
                if entry is None:
                    return None  # not opened yet: advance() opens it
                if entry.state == "open":
                    return Reseal(ctx.pipeline, epoch, partition, entry.version, "open", "", entry.reason, node.id)
            return None

        item = ctx.call(run, what=f"read the progress of correction {node.id}")
        if item is not None:
            out.append(item)
    return out
