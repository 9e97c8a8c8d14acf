"""Seal-time statistics and predictions: when each producer of a partition votes, learned from its
own recent epochs, kept compact in one znode per partition (:class:`~.deadline_records.SealStats`).

The statistics are folded forward: each sealed epoch is read once (its epoch record and its seal,
which keeps the votes with their ``voted_at``; an archived epoch through its archive), after the
newest epoch folded in (``through``) and never more than ``window`` epochs at a time, whatever the
history behind them. A prediction then reads the statistics, the frontier, the epoch's record, the
partition's seal and who has voted: a fixed number of reads however many epochs the pipeline has
(docs: Bounded answers), plus at most ``window`` epochs to fold when it is the first look after
those epochs sealed.
"""

from __future__ import annotations

from dataclasses import replace

from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput, UnknownPartition
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.steps import Create, SetData
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.recipes.deadlines.paths import DeadlinePaths
from airflow_epochs.coordination.recipes.deadlines.records import (
    DEFAULT_QUANTILE,
    DEFAULT_WINDOW,
    MAX_WINDOW,
    MIN_SAMPLES,
    Calendar,
    DeadlineSpec,
    ProducerForecast,
    ProducerStats,
    SealForecast,
    SealStats,
    quantile,
)
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record, frontier, producer_names
from airflow_epochs.coordination.wire.vote_records import CastVote, SealNode


def check_window(window: object) -> int:
    """``window`` if it is a whole number of epochs in 1..:data:`MAX_WINDOW`, else :class:`InvalidInput`."""
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise InvalidInput(f"the statistics window must be a whole number of epochs in 1..{MAX_WINDOW}, "
                           f"not {window!r}")
    return window


def check_quantile(q: object) -> float:
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
        raise InvalidInput(f"quantile must be strictly between 0 and 1, not {q!r}")
    return float(q)


def sealed_votes(call: Call, ctx: PipelineContext, epoch: int, partition: str) -> tuple[float, dict[str, float]] | None:
    """When sealed ``epoch`` opened and when each producer of ``partition`` voted, or None (not
    sealed in its current opening, or compacted without an archive)."""
    found = epoch_record(call, ctx, epoch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        return None if past is None else sealed_votes(past, ctx, epoch, partition)
    node = found.record
    if node.state == "rolled_back":
        return None
    seal_path = ctx.paths.seal(epoch, node.generation, partition)
    raw = call.get(seal_path)
    if raw is None:
        return None
    seal = SealNode.from_bytes(raw.data, path=seal_path)
    if seal.votes is not None:
        return node.opened_at, {name: vote.voted_at for name, vote in seal.votes.votes.items()}
    names = producer_names(call, ctx, epoch, seal.attempt, partition, seal_path)
    paths = [ctx.paths.vote(epoch, seal.attempt, partition, name) for name in names]
    votes: dict[str, float] = {}
    for name, path, vote_raw in zip(names, paths, call.get_many(paths), strict=True):
        if vote_raw is None:
            raise CorruptPayload(f"{seal_path}: the vote of {name!r} is missing")
        votes[name] = CastVote.from_znode(vote_raw.data, path, name, seal.attempt).voted_at
    return node.opened_at, votes


def read_stats(call: Call, ctx: PipelineContext, partition: str) -> Found[SealStats] | None:
    path = DeadlinePaths(ctx.paths).seal_stats(partition)
    raw = call.get(path)
    return None if raw is None else Found(SealStats.from_bytes(raw.data, path=path), raw.stat)


def fold(call: Call, ctx: PipelineContext, partition: str, *, window: int = DEFAULT_WINDOW,
         calendar: Calendar | None = None, write: bool = True) -> SealStats:
    """The partition's statistics with every epoch sealed since ``through`` folded in (at most
    ``window`` of them: older ones would fall out anyway), written back compare-and-set (unless
    ``write`` is False: a reader's page writes nothing). A lost race answers with what the winner
    wrote (it folded the same sealed epochs)."""
    found = read_stats(call, ctx, partition)
    stats = SealStats(partition, window=window) if found is None else found.record
    if stats.window != window:
        stats = replace(stats, window=window)
    top = frontier(call, ctx)
    start = max(stats.through + 1, top - stats.window + 1, 1)
    if start > top:
        return stats
    new = stats
    for epoch in range(start, top + 1):
        voted = sealed_votes(call, ctx, epoch, partition)
        if voted is not None:
            opened_at, votes = voted
            end = None if calendar is None else calendar.span(epoch)[1].timestamp()
            new = new.folded(epoch, opened_at, end, votes)
    new = replace(new, through=top)
    if not write:
        return new
    path = DeadlinePaths(ctx.paths).seal_stats(partition)
    if found is None:
        if call.exists(ctx.paths.seal_stats_dir) is None:
            call.try_commit([Create(ctx.paths.seal_stats_dir)])  # a concurrent create is as good
        failure = call.try_commit([Create(path, new.to_bytes())])
    else:
        failure = call.try_commit([SetData(path, new.to_bytes(), int(found.stat.version))])
    if failure is not None:
        if isinstance(failure.error, NoAuthError):  # a reader without write access still gets its answer
            return new
        if isinstance(failure.error, (NodeExistsError, BadVersionError)):
            latest = read_stats(call, ctx, partition)
            return latest.record if latest is not None else new
        raise failure.error
    return new


def forecast_of(name: str, stats: ProducerStats | None, opened_at: float, interval_end: float | None,
                q: float) -> ProducerForecast:
    """When ``name`` is expected to vote in an epoch opened at ``opened_at``: the median and the
    ``q`` quantile of its past delays after opening (and after the data interval's end, when both
    are known: a producer cannot finish before its data is there), or None with too little history."""
    samples = stats.samples if stats is not None else ()
    last = stats.last_voted_at if stats is not None else None
    if len(samples) < MIN_SAMPLES:
        return ProducerForecast(name, None, None, last, len(samples))
    since_open = [s.since_open for s in samples]
    typical, late = opened_at + quantile(since_open, 0.5), opened_at + quantile(since_open, q)
    since_end = [s.since_end for s in samples if s.since_end is not None]
    if interval_end is not None and len(since_end) == len(samples):
        typical = max(typical, interval_end + quantile(since_end, 0.5))
        late = max(late, interval_end + quantile(since_end, q))
    return ProducerForecast(name, typical, late, last, len(samples))


def predict(call: Call, ctx: PipelineContext, epoch: int, partition: str, stats: SealStats, *,
            q: float = DEFAULT_QUANTILE, calendar: Calendar | None = None) -> SealForecast:
    """The predicted seal of ``partition`` at ``epoch`` from ``stats`` (see :class:`SealForecast`);
    :class:`UnknownPartition` if the epoch's configuration has no such partition."""
    validate_epoch(epoch)
    validate_name("partition", partition)
    found = epoch_record(call, ctx, epoch)
    if found is None:
        past = archived_call(call, ctx, epoch)
        if past is not None:
            return predict(past, ctx, epoch, partition, stats, q=q, calendar=calendar)
        return SealForecast(epoch, partition, "not_open", quantile=q, generation=0)  # no record: none opened
    node = found.record
    # an opening after a rollback is the record's next generation
    generation = node.generation + 1 if node.state == "rolled_back" else node.generation
    producers = ctx.config(call, node.config_version).config.partitions.get(partition)
    if producers is None:
        raise UnknownPartition(f"pipeline {ctx.pipeline!r}: partition {partition!r} is not in the configuration "
                               f"of epoch {epoch} (version {node.config_version})")
    seal_raw = None if node.state == "rolled_back" else call.get(ctx.paths.seal(epoch, node.generation, partition))
    if seal_raw is not None:
        seal = SealNode.from_bytes(seal_raw.data, path=ctx.paths.seal(epoch, node.generation, partition))
        return SealForecast(epoch, partition, "sealed", quantile=q, opened_at=node.opened_at, sealed_at=seal.sealed_at,
                            generation=generation)
    if node.state != "open":
        opened = None if node.state == "rolled_back" else node.opened_at  # the next opening has not happened
        return SealForecast(epoch, partition, "not_open", quantile=q, opened_at=opened, generation=generation)
    voted = set() if len(producers) == 1 else \
        set(call.children(ctx.paths.vote_counter(epoch, node.attempt, partition)) or ())
    end = None if calendar is None else calendar.span(epoch)[1].timestamp()
    missing = tuple(forecast_of(name, stats.producers.get(name), node.opened_at, end, q)
                    for name in producers if name not in voted)
    if not missing:  # every vote is in: the seal is being written
        return SealForecast(epoch, partition, "sealing", quantile=q, opened_at=node.opened_at, generation=generation)
    if any(m.typical_at is None for m in missing):
        return SealForecast(epoch, partition, "too_little_history", quantile=q, missing=missing,
                            opened_at=node.opened_at, generation=generation)
    return SealForecast(epoch, partition, "predicted", max((m.typical_at or 0.0) for m in missing),
                        max((m.late_at or 0.0) for m in missing), q, missing, node.opened_at, generation=generation)


def fold_before_compaction(call: Call, ctx: PipelineContext) -> int:
    """Fold every partition that keeps statistics or has a declared deadline up to the frontier, so
    the epochs a compaction is about to remove are in its samples before they leave ZooKeeper (without
    an archive nothing could read them later); returns the partitions folded. Run before compaction
    moves ``compacted_through``: a compaction cut short finds them folded already (``through``)."""
    kept = set(call.children(ctx.paths.seal_stats_dir) or ())
    every = sorted(call.children(ctx.paths.deadlines) or ())
    declared = {name.split(",", 1)[0] for name in every}
    for partition in sorted(kept | declared):
        names = [n for n in every if n.split(",", 1)[0] == partition]
        paths = [f"{ctx.paths.deadlines}/{n}" for n in names]
        specs = [DeadlineSpec.from_bytes(raw.data, path=p)
                 for p, raw in zip(paths, call.get_many(paths), strict=True) if raw is not None]
        stats = read_stats(call, ctx, partition)
        fold(call, ctx, partition, window=stats.record.window if stats is not None else DEFAULT_WINDOW,
             calendar=next((s.calendar for s in specs if s.calendar is not None), None))
    return len(kept | declared)
