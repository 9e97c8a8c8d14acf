"""Re-seal: a new version of a sealed (epoch, partition), and the votes that seal it.

:func:`reseal` opens version N+1 of a sealed (epoch, partition) in one compare-and-set of its versions
node (:mod:`..wire.versions`) with a ``reseal_opened`` history event; the original seal (version 1)
and every earlier version stay as they were. While a version is open, a second re-seal of the same
(epoch, partition) is refused (:class:`ResealInFlight`): one in flight at a time, also with two
requests at once (the loser's compare-and-set fails, it reads again and sees the winner's). A request
stays in flight until its correction is done: while that still re-produces the seals that read the old
version, a new request is refused too (it would re-produce them again).

:func:`vote_version` records a producer's vote under the open version, in a compare-and-set of the same
node that checks the version is still the open one (the fence); the vote that completes the
partition's producers (the configuration in force at that epoch) seals the version: the node marks it
sealed, its document ``v-<N>`` is created, and for a version a user asked for, its correction
(:mod:`.invalidation`) is created in the same transaction, so that it cannot be lost.

Both take a request id, are answered from ZooKeeper after a lost reply (the version entry, or the
vote, carries it), and a repeat returns the first answer without applying it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_epochs.coordination.base.call import Call, commit_or_conflict
from airflow_epochs.coordination.base.errors import DuplicateVote, InvalidInput, UnknownProducer
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.steps import Create, SetData, Step
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.recipes.corrections.errors import (
    InputsNotResealed,
    ResealCompacted,
    ResealInFlight,
    ResealNotSealed,
    ResealRefused,
    ResealUnknownPartition,
    VersionNotOpen,
)
from airflow_epochs.coordination.recipes.corrections.records import (
    MAX_REASON,
    MAX_VERSION_NUMBER,
    MAX_VERSIONS,
    CorrectionNode,
    Reseal,
    SealedVersion,
    VersionEntry,
    VersionsNode,
    VersionVote,
    VersionVoteResult,
    correction_id,
    correction_path,
    corrections_dir,
    reseals_dir,
    version_path,
    versions_path,
)
from airflow_epochs.coordination.recipes.corrections.versions import correction, sealed_version, versions_node
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import frontier_with_stat, seal_record
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.events import ResealOpened, VersionSealed
from airflow_epochs.coordination.wire.records import check_read_versions, check_upstream


def check_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput(f"a re-seal needs a reason (recorded in the history), not {reason!r}; nothing was written")
    return reason.strip()[:MAX_REASON]


def producers_at(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> tuple[str, ...]:
    """The producers of ``partition`` at ``epoch``; :class:`ResealUnknownPartition` if it has none there."""
    record = ctx.record(call)
    if epoch <= record.compacted_through:
        raise ResealCompacted(
            f"pipeline {ctx.pipeline!r}: epoch {epoch} is compacted (through {record.compacted_through}); its "
            "inputs and votes are archived and cannot be re-produced; nothing was written")
    version = record.version_for(epoch)
    partitions = {} if version is None else dict(ctx.config(call, version).config.partitions)
    if partition not in partitions:
        raise ResealUnknownPartition(
            f"pipeline {ctx.pipeline!r}: partition {partition!r} is not configured at epoch {epoch} "
            f"(configured: {sorted(partitions)}); nothing was written")
    return tuple(partitions[partition])


def _dir_ops(call: Call, path: str) -> list[Step]:
    """Create ``path`` in the same transaction if it does not exist (a lost race is a conflict: decide again)."""
    return [] if call.exists(path) is not None else [Create(path, b"")]


def _node_write(call: Call, ctx: PipelineContext, found: Found[VersionsNode] | None, node: VersionsNode) -> list[
        Step]:
    path = versions_path(ctx.paths, node.epoch, node.partition)
    if found is None:
        return [*_dir_ops(call, reseals_dir(ctx.paths)), Create(path, node.to_bytes())]
    return [SetData(path, node.to_bytes(), int(found.stat.version))]


def reseal(ctx: PipelineContext, epoch: int, partition: str, *, reason: str, request_id: str | None = None) -> Reseal:
    """Open the next version of the sealed ``partition`` at ``epoch``; see ``EpochLedger.reseal``."""
    validate_epoch(epoch)
    validate_name("partition", partition)
    why = check_reason(reason)

    def answer(entry: VersionEntry) -> Reseal:
        return Reseal(ctx.pipeline, epoch, partition, entry.version, entry.state, entry.request, entry.reason,
                      entry.correction)

    def find(call: Call) -> Reseal | None:
        found = versions_node(call, ctx, epoch, partition)
        entry = None if found is None else next((e for e in found.record.entries if e.request == call.request_id), None)
        return None if entry is None else answer(entry)

    def body(call: Call) -> Reseal:
        producers_at(call, ctx, epoch, partition)
        frontier, _ = frontier_with_stat(call, ctx)
        if epoch > frontier:
            raise ResealNotSealed(
                f"pipeline {ctx.pipeline!r}: epoch {epoch} is not sealed yet (the frontier is {frontier}); only a "
                "sealed epoch's partition can be re-sealed; nothing was written")
        seal = seal_record(call, ctx, epoch, partition)
        if seal is None:
            raise ResealNotSealed(f"pipeline {ctx.pipeline!r}: {partition!r} is not sealed at epoch {epoch}; nothing "
                                  "was written")
        found = versions_node(call, ctx, epoch, partition)
        node = found.record.of_generation(seal.generation) if found is not None else \
            VersionsNode(epoch, partition, generation=seal.generation)
        running = node.open
        if running is not None:
            raise ResealInFlight(
                f"pipeline {ctx.pipeline!r}: version {running.version} of {partition!r} at epoch {epoch} is being "
                f"re-sealed (request {running.request or running.correction!r}); one re-seal at a time; nothing "
                "was written", version=running.version, request=running.request)
        _check_no_correction_running(call, ctx, node)
        if len(node.entries) >= MAX_VERSIONS - 1:
            raise ResealRefused(f"pipeline {ctx.pipeline!r}: {partition!r} at epoch {epoch} has {MAX_VERSIONS} "
                                "versions already; nothing was written")
        version = node.next_version
        entry = VersionEntry(version, "open", call.request_id, why, correction_id(epoch, partition, version),
                             ctx.clock())
        ops = _node_write(call, ctx, found, replace(node, entries=(*node.entries, entry), votes={}))
        ops += ctx.event(ResealOpened(epoch=epoch, partition=partition, version=version, correction=entry.correction,
                                      reason=why, request=call.request_id))
        commit_or_conflict(call, ops)
        return answer(entry)

    return ctx.call(body, what=f"re-seal {partition!r} at epoch {epoch}", request_id=request_id, find=find)


def _check_no_correction_running(call: Call, ctx: PipelineContext, node: VersionsNode) -> None:
    """Refuse a re-seal of a key whose last user-asked version is sealed while its correction still re-produces
    what read it: that request is still in flight, and a second one would re-produce the same seals again."""
    asked = [e for e in node.entries if e.correction == correction_id(node.epoch, node.partition, e.version)]
    if not asked:
        return
    last = asked[-1]
    found = correction(call, ctx, last.correction)
    if found is not None and found.record.state not in ("done", "rolled_back"):
        raise ResealInFlight(
            f"pipeline {ctx.pipeline!r}: version {last.version} of {node.partition!r} at epoch {node.epoch} is "
            f"sealed, and its correction {last.correction} (request {last.request!r}) is still re-producing the "
            f"seals that read it ({found.record.state}); one re-seal at a time: retry the task that re-produces it, "
            "or wait for it; nothing was written", version=last.version, request=last.request)


def open_derived(call: Call, ctx: PipelineContext, epoch: int, partition: str, origin: CorrectionNode) -> bool:
    """Open the next version of a seal ``origin`` made stale (once: False if it is opened already, or
    another re-seal of it is in flight, to be tried again later)."""
    seal = seal_record(call, ctx, epoch, partition)
    if seal is None:  # rolled back since the plan was made: nothing of it to re-produce
        return False
    found = versions_node(call, ctx, epoch, partition)
    node = found.record.of_generation(seal.generation) if found is not None else \
        VersionsNode(epoch, partition, generation=seal.generation)
    if any(e.correction == origin.id for e in node.entries):
        return False
    if node.open is not None or len(node.entries) >= MAX_VERSIONS - 1:
        return False
    o_epoch, o_partition, o_version = origin.origin
    entry = VersionEntry(node.next_version, "open", "", f"stale: read {o_partition}@{o_epoch} v{o_version - 1}",
                         origin.id, ctx.clock())
    ops = _node_write(call, ctx, found, replace(node, entries=(*node.entries, entry), votes={}))
    ops += ctx.event(ResealOpened(epoch=epoch, partition=partition, version=entry.version, correction=origin.id,
                                  reason=entry.reason, request=""))
    commit_or_conflict(call, ops)
    return True


def vote_version(
    ctx: PipelineContext, epoch: int, partition: str, version: int, producer: str,
    manifest: Mapping[str, Any] | None = None, *, snapshot: Any = None, upstream: Mapping[str, int] | None = None,
    read_versions: Mapping[str, int] | None = None, request_id: str | None = None,
) -> VersionVoteResult:
    """Vote ``producer``'s re-produced part of ``partition`` at ``epoch`` under ``version``; see
    ``EpochLedger.vote_version``."""
    validate_epoch(epoch)
    validate_name("partition", partition)
    validate_name("producer", producer)
    if isinstance(version, bool) or not isinstance(version, int) or not 2 <= version <= MAX_VERSION_NUMBER:
        raise InvalidInput(f"version must be an integer in 2..{MAX_VERSION_NUMBER}, not {version!r}")
    body_manifest = payloads.check_manifest({} if manifest is None else manifest)
    body_snapshot = payloads.check_snapshot(snapshot)
    lineage = check_upstream(upstream, limit=payloads.MAX_UPSTREAM)
    reads = check_read_versions(read_versions, lineage, pipeline=ctx.pipeline)
    what = f"vote {producer!r} on {partition!r} at epoch {epoch} version {version}"

    def result(sealed: bool, duplicate: bool = False) -> VersionVoteResult:
        return VersionVoteResult(epoch, partition, version, producer, sealed, duplicate)

    def find(call: Call) -> VersionVoteResult | None:
        found = versions_node(call, ctx, epoch, partition)
        entry = None if found is None else found.record.entry(version)
        if entry is None:
            return None
        if entry.state == "open":
            vote = found.record.votes.get(producer) if found is not None else None
            return result(False) if vote is not None and vote.request == call.request_id else None
        doc = sealed_version(call, ctx, epoch, partition, version)
        vote = None if doc is None else doc.votes.get(producer)
        return result(True) if vote is not None and vote.request == call.request_id else None

    def body(call: Call) -> VersionVoteResult:
        producers = producers_at(call, ctx, epoch, partition)
        if producer not in producers:
            raise UnknownProducer(f"pipeline {ctx.pipeline!r}: producer {producer!r} is not registered for "
                                  f"{partition!r} at epoch {epoch} (registered: {list(producers)})")
        (node, stat), entry = _open_entry(call, ctx, epoch, partition, version, producer)
        if entry.correction != correction_id(epoch, partition, version):
            _check_inputs_resealed(call, ctx, entry.correction, epoch, partition)
        mine = VersionVote(producer, body_manifest, body_snapshot, lineage, call.request_id, ctx.clock(), reads)
        existing = node.votes.get(producer)
        if existing is not None:
            if (existing.manifest, existing.snapshot, dict(existing.upstream), dict(existing.read_versions)) == (
                    body_manifest, body_snapshot, lineage, reads):
                return result(False, duplicate=True)
            raise DuplicateVote(f"pipeline {ctx.pipeline!r}: {producer!r} already voted on {partition!r} at epoch "
                                f"{epoch} version {version} with another manifest; nothing was written")
        votes = {**node.votes, producer: mine}
        path = versions_path(ctx.paths, epoch, partition)
        if set(votes) != set(producers):
            commit_or_conflict(call, [SetData(path, replace(node, votes=votes).to_bytes(), int(stat.version))])
            return result(False)
        commit_or_conflict(call, _seal_ops(call, ctx, node, int(stat.version), entry, votes))
        return result(True)

    return ctx.call(body, what=what, request_id=request_id, find=find)


def _open_entry(call: Call, ctx: PipelineContext, epoch: int, partition: str, version: int,
                producer: str) -> tuple[Found[VersionsNode], VersionEntry]:
    """The versions node (and its stat) holding ``version`` open, of the epoch's current opening; else
    :class:`VersionNotOpen` naming why (never opened, sealed already, or of a rolled-back opening)."""
    found = versions_node(call, ctx, epoch, partition)
    seal = seal_record(call, ctx, epoch, partition)
    current = found is not None and seal is not None and found.record.generation == seal.generation
    entry = found.record.entry(version) if found is not None and current else None
    if found is None or entry is None or entry.state != "open":
        state = "never opened" if entry is None else "sealed already"
        if found is not None and not current:
            state = "of an opening of the epoch that was rolled back"
        raise VersionNotOpen(f"pipeline {ctx.pipeline!r}: version {version} of {partition!r} at epoch {epoch} "
                             f"is {state}; the vote of {producer!r} is refused; nothing was written")
    return found, entry


def _seal_ops(call: Call, ctx: PipelineContext, node: VersionsNode, stat_version: int, entry: VersionEntry,
              votes: dict[str, VersionVote]) -> list[Step]:
    """The transaction sealing ``entry`` with ``votes``: the node marks it sealed, its document is created,
    the history records it, and a version a user asked for creates its correction (``planning``)."""
    epoch, partition, version = node.epoch, node.partition, entry.version
    now = ctx.clock()
    sealed = replace(entry, state="sealed", sealed_at=now)
    entries = tuple(sealed if e.version == version else e for e in node.entries)
    doc = SealedVersion(epoch, partition, version, entry.request, entry.reason, entry.correction,
                        entry.opened_at, now, votes)
    ops: list[Step] = [SetData(versions_path(ctx.paths, epoch, partition),
                               replace(node, entries=entries, votes={}).to_bytes(), stat_version),
                       Create(version_path(ctx.paths, epoch, partition, version), doc.to_bytes())]
    ops += ctx.event(VersionSealed(epoch=epoch, partition=partition, version=version, correction=entry.correction))
    if entry.correction == correction_id(epoch, partition, version):  # asked for: its correction starts
        origin = CorrectionNode(entry.correction, (epoch, partition, version), entry.request, entry.reason,
                                "planning", created_at=now)
        ops += [*_dir_ops(call, corrections_dir(ctx.paths)),
                Create(correction_path(ctx.paths, origin.id), origin.to_bytes())]
    return ops


def _check_inputs_resealed(call: Call, ctx: PipelineContext, correction_id_: str, epoch: int, partition: str) -> None:
    """Refuse a vote under a correction's version while a seal planned before it is not re-sealed yet."""
    found = correction(call, ctx, correction_id_)
    if found is None:
        return
    plan = found.record.plan
    if (epoch, partition) not in plan:
        return
    # Planned seals are re-sealed one after the other (each vote checks the one before), so the one
    # just before is the only one to check.
    for item in plan[max(0, plan.index((epoch, partition)) - 1):plan.index((epoch, partition))]:
        earlier = versions_node(call, ctx, *item)
        entry = None if earlier is None else next(
            (e for e in earlier.record.entries if e.correction == correction_id_), None)
        if entry is None or entry.state != "sealed":
            raise InputsNotResealed(
                f"pipeline {ctx.pipeline!r}: {partition!r} at epoch {epoch} is re-produced after {item[1]!r} at epoch "
                f"{item[0]} (correction {correction_id_}), which is not re-sealed yet; nothing was written")
