"""Partition deadlines: declared per partition by the pipeline or by a consumer, checked against the
predicted seal, and exactly one alert per late (epoch, partition) across watchers and deployments.

The alert is a create-only znode (``late-alerts/<epoch>,<partition>``) committed with its
``deadline_missed`` history event in one transaction: of any number of watchers racing past the
same deadline, in one process or in two deployments, exactly one creates it and is told to deliver
it. Delivery (the callback) is at least once on top of that: the raiser holds an ephemeral
``...,run`` node while its callback runs and marks the alert delivered afterwards; a watcher that
finds an alert undelivered and its run node gone (its raiser died, e.g. killed -9) takes the
delivery over. A partition that seals after its deadline gets ``sealed_at`` and ``late_by`` on its
alert and a ``sealed_late`` event, once.

Before the claim the watcher syncs its server with the leader, so a seal committed before the
deadline is seen and no alert is raised for a partition sealed in time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import ContentionExhausted, InvalidInput, UnknownPartition
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.steps import Create, Delete, SetData, Step
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.protocol.retention import CompactionStep
from airflow_epochs.coordination.recipes.backpressure.consumers import UnknownConsumer
from airflow_epochs.coordination.recipes.deadlines.alerts import archived_alert, prune_alerts
from airflow_epochs.coordination.recipes.deadlines.paths import DeadlinePaths
from airflow_epochs.coordination.recipes.deadlines.records import (
    DEFAULT_WINDOW,
    DeadlineSpec,
    LateAlert,
    ProducerForecast,
    SealForecast,
    SealStats,
)
from airflow_epochs.coordination.recipes.deadlines.stats import (
    check_quantile,
    check_window,
    fold,
    fold_before_compaction,
    predict,
    sealed_votes,
)
from airflow_epochs.coordination.recipes.deadlines.timeline import SealJudged, deadline_before_seal, deadline_of
from airflow_epochs.coordination.recipes.deadlines.watch import DeadlineWatch
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record
from airflow_epochs.coordination.wire.events import DeadlineMissed, SealedLate

_ROUNDS = 20
# Deadlines one pipeline declares at most (partitions x declarers): the folder a check lists stays small.
MAX_DECLARED = 1024
# Seconds between looks at an epoch that is not open and has no deadline yet (a watch wakes it sooner).
_REVISIT = 30.0


@dataclass(frozen=True)
class Verdict:
    """Where one (epoch, partition) stands against its deadline.

    ``state``: ``no_deadline`` (none declared, or only predicted ones with too little history),
    ``not_open``, ``waiting`` (before ``deadline_at``), ``in_time`` (sealed by then), ``late``
    (past it unsealed: ``alert`` is the one alert) or ``sealed_late`` (sealed after it).
    ``deliver``: this watcher holds the alert's delivery: run the callback, then
    :meth:`PartitionDeadlines.delivered`.
    """

    epoch: int
    partition: str
    state: str
    deadline_at: float | None
    forecast: SealForecast
    alert: LateAlert | None = None
    deliver: bool = False


class PartitionDeadlines:
    """The deadlines of one pipeline's partitions (``ledger.deadlines()``).

    :param ctx: the pipeline.
    :param window: sealed epochs the statistics keep per producer (1..256).
    """

    def __init__(self, ctx: PipelineContext, *, window: int = DEFAULT_WINDOW) -> None:
        self.ctx = ctx
        self.paths = ctx.paths
        self.window = check_window(window)

    # -- declarations ------------------------------------------------------------------------

    def declare(self, spec: DeadlineSpec) -> DeadlineSpec:
        """Declare (or replace) ``spec``'s deadline for its partition and declarer. Refused before any
        write: a partition not in the configuration in force, a consumer declarer not registered."""
        if not isinstance(spec, DeadlineSpec):
            raise InvalidInput(f"expected a DeadlineSpec, not {type(spec).__name__}")
        path = DeadlinePaths(self.paths).deadline(spec.partition, spec.declarer)

        def run(call: Call) -> DeadlineSpec:
            record = self.ctx.record(call)
            config = self.ctx.config_for(call, max(record.newest_epoch, record.first_epoch), record).config
            if spec.partition not in config.partitions:
                raise UnknownPartition(f"pipeline {self.ctx.pipeline!r}: no partition {spec.partition!r} to declare a "
                                       f"deadline for (partitions: {sorted(config.partitions)}); nothing was written")
            if spec.declarer != "pipeline" and call.exists(self.paths.consumer(spec.declarer)) is None:
                raise UnknownConsumer(f"pipeline {self.ctx.pipeline!r}: consumer {spec.declarer!r} is not registered; "
                                   "register it before it declares a deadline; nothing was written")
            for _ in range(_ROUNDS):
                if self._put(call, spec, path):
                    return spec
            raise ContentionExhausted(f"{path}: lost {_ROUNDS} rounds declaring it; declare again")

        return self.ctx.call(run, what=f"declare a deadline of {spec.partition!r}")

    def _put(self, call: Call, spec: DeadlineSpec, path: str) -> bool:
        """One round of :meth:`declare`'s write; False if another declare moved first (look again).

        A new declaration bumps the folder's data version in the same transaction and is guarded by
        the version its count was read with, so of simultaneous declares past the cap none commits
        unseen: the count a declare was judged by is the count it commits against."""
        folder = call.exists(self.paths.deadlines)
        if folder is None:
            call.try_commit([Create(self.paths.deadlines)])  # a concurrent create is as good
            return False
        found = call.get(path)
        if found is not None:  # a replacement does not change the count
            steps: list[Step] = [SetData(path, spec.to_bytes(), found.stat.version)]
        elif int(folder.numChildren) >= MAX_DECLARED:
            raise InvalidInput(f"pipeline {self.ctx.pipeline!r} declares {folder.numChildren} deadlines, at most "
                               f"{MAX_DECLARED}; the deadline of {spec.partition!r} was refused, nothing written")
        else:
            steps = [SetData(self.paths.deadlines, b"", int(folder.version)), Create(path, spec.to_bytes())]
        failure = call.try_commit(steps)
        if failure is None:
            return True
        if isinstance(failure.error, (BadVersionError, NodeExistsError, NoNodeError)):
            return False
        raise failure.error

    def specs(self, partition: str) -> list[DeadlineSpec]:
        """The deadlines declared for ``partition`` (the pipeline's and its consumers')."""
        validate_name("partition", partition)
        return self.ctx.call(lambda call: self._specs(call, partition), what=f"read the deadlines of {partition!r}")

    def _specs(self, call: Call, partition: str) -> list[DeadlineSpec]:
        names = [n for n in (call.children(self.paths.deadlines) or ()) if n.split(",", 1)[0] == partition]
        paths = [f"{self.paths.deadlines}/{n}" for n in sorted(names)]
        return [DeadlineSpec.from_bytes(raw.data, path=p)
                for p, raw in zip(paths, call.get_many(paths), strict=True) if raw is not None]

    # -- predictions -------------------------------------------------------------------------

    def statistics(self, partition: str) -> SealStats:
        """The partition's seal-time statistics, with every epoch sealed since the last look folded in."""
        validate_name("partition", partition)
        return self.ctx.call(lambda call: fold(call, self.ctx, partition, window=self.window,
                                               calendar=self._calendar(self._specs(call, partition))),
                             what=f"fold the seal statistics of {partition!r}")

    def predicted_seal(self, epoch: int, partition: str, *, quantile: float | None = None) -> SealForecast:
        """When ``partition`` of ``epoch`` is expected to seal: the latest predicted vote of its missing
        producers, typical (median) and late (``quantile``, default the partition's predicted
        deadline's or 0.9), or ``too_little_history``; a fixed number of reads (``state/seal_stats.py``)."""
        validate_epoch(epoch)
        validate_name("partition", partition)
        if quantile is not None:
            check_quantile(quantile)

        def run(call: Call) -> SealForecast:
            specs = self._specs(call, partition)
            q = quantile if quantile is not None else next(
                (s.quantile for s in specs if s.mode == "predicted"), 0.9)
            calendar = self._calendar(specs)
            stats = fold(call, self.ctx, partition, window=self.window, calendar=calendar)
            return predict(call, self.ctx, epoch, partition, stats, q=q, calendar=calendar)

        return self.ctx.call(run, what=f"predict the seal of {partition!r} at epoch {epoch}")

    @staticmethod
    def _calendar(specs: list[DeadlineSpec]) -> Any:
        return next((s.calendar for s in specs if s.calendar is not None), None)

    # -- checking and alerting ---------------------------------------------------------------

    def check(self, epoch: int, partition: str, *, due: bool = False) -> Verdict:
        """Where ``partition`` of ``epoch`` stands against its earliest deadline; past it unsealed,
        the one alert is raised (by this call, ``deliver`` set, or found raised by another).

        :param due: the caller's last look put the deadline at or before now (a watch woken by its
            timer): the server is synced with the leader before anything is read, so the one pass of
            reads that follows is the one an alert is raised on (no second prediction after a sync).
        """
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda call: self._check(call, epoch, partition, synced=due),
                             what=f"check the deadline of {partition!r} at epoch {epoch}")

    def preview(self, epoch: int, partition: str) -> Verdict:
        """:meth:`check` without writing anything (for pages and status): a partition past its deadline
        reads ``late`` whether or not a watcher raised its alert yet (``alert`` is then None)."""
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda call: self._check(call, epoch, partition, act=False),
                             what=f"read the deadline of {partition!r} at epoch {epoch}")

    def _check(self, call: Call, epoch: int, partition: str, *, act: bool = True, synced: bool = False) -> Verdict:
        if synced:  # every seal committed before now is seen by the reads below
            call.sync(self.paths.epoch(epoch))
        specs = self._specs(call, partition)
        calendar = self._calendar(specs)
        stats = fold(call, self.ctx, partition, window=self.window, calendar=calendar, write=act)
        q = next((s.quantile for s in specs if s.mode == "predicted"), 0.9)
        forecast = predict(call, self.ctx, epoch, partition, stats, q=q, calendar=calendar)
        judged = self._judge_seal(call, specs, stats, epoch, partition) if forecast.status == "sealed" else None
        deadline = judged.deadline_at if judged is not None else deadline_of(
            specs, stats, epoch, forecast.opened_at, [m.producer for m in forecast.missing])
        alert_path = DeadlinePaths(self.paths).late_alert(epoch, forecast.generation or 1, partition)
        found = late_alert(call, alert_path)
        alert = None if found is None else found.record
        if alert is not None:
            deadline = alert.deadline_at  # the deadline it was raised against stays the deadline
        if not act:
            return self._read_only(epoch, partition, deadline, forecast, alert, judged)
        if forecast.status == "sealed":
            if alert is not None:
                alert = self._sealed_late(call, alert, forecast.sealed_at or 0.0)
                return Verdict(epoch, partition, "sealed_late", deadline, forecast, alert, self._take_delivery(alert))
            if judged is not None and judged.late and deadline is not None:
                # late, and sealed before any watcher raised it (none ran, or it was restarted): the one
                # alert is raised now, with the seal's lateness on it
                return self._raise(call, epoch, partition, deadline, forecast,
                                   self._missing(stats, judged.missing), sealed_at=forecast.sealed_at)
            return Verdict(epoch, partition, "in_time", deadline, forecast)
        if alert is not None:
            return Verdict(epoch, partition, "late", deadline, forecast, alert, self._take_delivery(alert))
        if forecast.status == "not_open" and (deadline is None or self.ctx.clock() < deadline):
            return Verdict(epoch, partition, "not_open", deadline, forecast)
        if deadline is None:
            return Verdict(epoch, partition, "no_deadline", None, forecast)
        if self.ctx.clock() < deadline:
            return Verdict(epoch, partition, "waiting", deadline, forecast)
        # Past the deadline: make sure no seal committed before now is unseen by this server (done
        # already, before the reads above, when the caller said the deadline was due).
        again = forecast
        if not synced:
            call.sync(self.paths.epoch(epoch))
            again = predict(call, self.ctx, epoch, partition, stats, q=q, calendar=calendar)
            if again.status == "sealed":
                return self._check(call, epoch, partition)  # judged by its votes, as any seal is
        missing = again.missing
        if again.status == "not_open":  # past its deadline before it even opened: every producer is missing
            missing = self._missing(stats, self.ctx.config_for(call, epoch).config.partitions.get(partition, ()))
        return self._raise(call, epoch, partition, deadline, again, missing)

    def _judge_seal(self, call: Call, specs: list[DeadlineSpec], stats: SealStats, epoch: int,
                    partition: str) -> SealJudged:
        """How a sealed partition stood against its deadline, judged by when its votes landed."""
        found = sealed_votes(call, self.ctx, epoch, partition)
        if found is None:
            return SealJudged(None, False)
        opened_at, votes = found
        return deadline_before_seal(specs, stats, epoch, opened_at, votes)

    @staticmethod
    def _missing(stats: SealStats, names: Iterable[str]) -> tuple[ProducerForecast, ...]:
        """The alert's missing producers, by name, with what the statistics know of them."""
        return tuple(ProducerForecast(name, None, None, stats.producers[name].last_voted_at if name in stats.producers
                                      else None, len(stats.producers[name].samples) if name in stats.producers else 0)
                     for name in names)

    def _read_only(self, epoch: int, partition: str, deadline: float | None, forecast: SealForecast,
                   alert: LateAlert | None, judged: SealJudged | None) -> Verdict:
        if forecast.status == "sealed":
            late = alert is not None or (judged is not None and judged.late)
            return Verdict(epoch, partition, "sealed_late" if late else "in_time", deadline, forecast, alert)
        if alert is not None or (deadline is not None and self.ctx.clock() >= deadline):
            return Verdict(epoch, partition, "late", deadline, forecast, alert)
        if forecast.status == "not_open":
            return Verdict(epoch, partition, "not_open", deadline, forecast)
        return Verdict(epoch, partition, "no_deadline" if deadline is None else "waiting", deadline, forecast)

    def _raise(self, call: Call, epoch: int, partition: str, deadline: float, forecast: SealForecast,
               missing: tuple[ProducerForecast, ...], *, sealed_at: float | None = None) -> Verdict:
        """Raise the one alert of a late partition (a seal already late, with ``sealed_at``)."""
        generation = forecast.generation or 1  # an epoch never opened: its first opening
        path = DeadlinePaths(self.paths).late_alert(epoch, generation, partition)
        state = "late" if sealed_at is None else "sealed_late"
        alert = LateAlert(epoch, partition, deadline, self.ctx.clock(), self.ctx.owner, missing,
                          request=call.request_id, generation=generation, sealed_at=sealed_at,
                          late_by=None if sealed_at is None else max(0.0, sealed_at - deadline))
        # The alert and this watcher's hold on its delivery in one transaction: the raiser delivers it
        # without a second round trip (a hundred watches share one session, whose writes go in order).
        run = Create(DeadlinePaths(self.paths).late_alert_delivery(epoch, generation, partition),
                     self.ctx.owner.encode(), ephemeral=True)
        steps = [Create(path, alert.to_bytes()), run, *self.ctx.event(DeadlineMissed(
            epoch=epoch, partition=partition, deadline_at=deadline,
            missing=tuple(m.producer for m in missing), raised_by=self.ctx.owner))]
        failure = call.try_commit(steps)
        if failure is not None and isinstance(failure.error, NoNodeError) and failure.step is steps[0]:
            # the pipeline's first alert: its folder is made then (not looked for at every alert)
            call.try_commit([Create(self.paths.late_alerts)])  # a concurrent create is as good
            failure = call.try_commit(steps)
        if failure is None:
            return Verdict(epoch, partition, state, deadline, forecast, alert, True)
        if not isinstance(failure.error, NodeExistsError):
            raise failure.error
        raised = late_alert(call, path)
        if raised is None:  # pragma: no cover - alerts are never deleted while their epoch is kept
            raise failure.error
        # Raised by another watcher (or by this call, its answer lost): whoever takes the run node first
        # delivers it, so a raiser that died between the two creates leaves nothing undelivered.
        return Verdict(epoch, partition, state, raised.record.deadline_at, forecast, raised.record,
                       self._take_delivery(raised.record))

    def _sealed_late(self, call: Call, alert: LateAlert, sealed_at: float) -> LateAlert:
        """Record once on the alert (and in the history) that the partition sealed, and how late."""
        path = DeadlinePaths(self.paths).late_alert(alert.epoch, alert.generation, alert.partition)
        for _ in range(_ROUNDS):
            found = late_alert(call, path)
            if found is None:
                return alert
            current = found.record
            if current.sealed_at is not None:
                return current
            done = replace(current, sealed_at=sealed_at, late_by=max(0.0, sealed_at - current.deadline_at))
            failure = call.try_commit([SetData(path, done.to_bytes(), found.stat.version), *self.ctx.event(SealedLate(
                epoch=alert.epoch, partition=alert.partition, deadline_at=current.deadline_at, sealed_at=sealed_at,
                late_by=done.late_by or 0.0))])
            if failure is None:
                return done
            if not isinstance(failure.error, BadVersionError):
                raise failure.error
        raise ContentionExhausted(f"{path}: lost {_ROUNDS} rounds recording the late seal")

    # -- delivery ----------------------------------------------------------------------------

    def _take_delivery(self, alert: LateAlert) -> bool:
        """Whether this watcher now holds the delivery of ``alert`` (not delivered yet, nobody
        else running it): an ephemeral run node, gone with its holder's session."""
        if alert.delivered_at is not None:
            return False
        run = DeadlinePaths(self.paths).late_alert_delivery(alert.epoch, alert.generation, alert.partition)
        try:
            self.ctx.client.create(run, self.ctx.owner.encode(), ephemeral=True)
        except NodeExistsError:
            # ours only if an earlier create of this very watcher committed (watchers in one process
            # share a session: the owner written into it tells them apart)
            try:
                data, stat = self.ctx.client.get(run)
            except NoNodeError:
                return self._take_delivery(alert)  # its holder just finished or died: look again
            return bool(stat.ephemeralOwner == self.ctx.client.client_id[0] and data == self.ctx.owner.encode())
        # A holder marks the alert delivered before its run node goes: read it again now that ours is in.
        path = DeadlinePaths(self.paths).late_alert(alert.epoch, alert.generation, alert.partition)
        try:
            raw, _stat = self.ctx.client.get(path)
        except NoNodeError:  # delivered by another and pruned by retention since this watcher read it
            self.ctx.client.delete(run)
            return False
        if LateAlert.from_bytes(raw, path=path).delivered_at is not None:
            self.ctx.client.delete(run)
            return False
        return True

    def delivered(self, alert: LateAlert) -> LateAlert:
        """Mark ``alert`` delivered (its callback ran) and let its run node go."""
        path = DeadlinePaths(self.paths).late_alert(alert.epoch, alert.generation, alert.partition)

        def run(call: Call) -> LateAlert:
            for _ in range(_ROUNDS):
                found = late_alert(call, path)
                if found is None:
                    return alert
                if found.record.delivered_at is not None:
                    return found.record
                done = replace(found.record, delivered_at=self.ctx.clock())
                mark = SetData(path, done.to_bytes(), found.stat.version)
                run = Delete(DeadlinePaths(self.paths).late_alert_delivery(alert.epoch, alert.generation,
                                                                           alert.partition))
                # marked and its run node gone in one transaction; a run node already gone (with its
                # session) is marked alone
                if call.try_commit([mark, run]) is None or call.try_commit([mark]) is None:
                    return done
            raise ContentionExhausted(f"{path}: lost {_ROUNDS} rounds marking the alert delivered")

        return self.ctx.call(run, what=f"mark the alert of {alert.partition!r} at epoch {alert.epoch} delivered")

    def abandon(self, alert: LateAlert) -> None:
        """Let go of the delivery of ``alert`` without marking it delivered (its callback failed or was
        cancelled): watchers in one process share a session that lives on, so the run node would
        otherwise hold every other watcher back until that session ends. Only this watcher's own run
        node is deleted."""
        run = DeadlinePaths(self.paths).late_alert_delivery(alert.epoch, alert.generation, alert.partition)
        try:
            data, stat = self.ctx.client.get(run)
        except NoNodeError:
            return
        if data == self.ctx.owner.encode() and stat.ephemeralOwner == self.ctx.client.client_id[0]:
            with contextlib.suppress(NoNodeError, BadVersionError):
                self.ctx.client.delete(run, version=stat.version)

    def alert(self, epoch: int, partition: str, *, generation: int | None = None) -> LateAlert | None:
        """The alert of ``partition`` at ``epoch`` (in its current opening, or in ``generation``), or None
        if none was raised."""
        validate_epoch(epoch)
        validate_name("partition", partition)

        def run(call: Call) -> LateAlert | None:
            found = epoch_record(call, self.ctx, epoch) if generation is None else None
            past = archived_call(call, self.ctx, epoch) if generation is None and found is None else None
            if past is not None:  # compacted: its record, and so its opening, is in the archive
                found = epoch_record(past, self.ctx, epoch)
            gen = generation if generation is not None else 1 if found is None else \
                found.record.generation + 1 if found.record.state == "rolled_back" else found.record.generation
            path = DeadlinePaths(self.paths).late_alert(epoch, gen, partition)
            raised = late_alert(call, path)
            if raised is None:  # retention prunes the alerts of compacted epochs, archiving them first
                return archived_alert(call, self.ctx, epoch, gen, partition)
            return raised.record

        return self.ctx.call(run, what=f"read the alert of {partition!r} at epoch {epoch}")

    def watch(self, epoch: int, partition: str, *, until_sealed: bool = False) -> DeadlineWatch:
        """The asynchronous wait for the verdict, as a trigger runs it (no thread held; see
        :mod:`airflow_epochs.coordination.recipes.deadlines.watch`)."""
        return DeadlineWatch(self, epoch, partition, until_sealed=until_sealed)

    def wait(self, epoch: int, partition: str, *, timeout: float | None = None,
             stop: threading.Event | None = None, until_sealed: bool = False) -> Verdict:
        """Block until ``partition`` of ``epoch`` is decided against its deadline: sealed (in time or
        late), late with an alert this watcher must deliver, late and delivered by another (with
        ``until_sealed``: sealed after all, its lateness recorded), or ``timeout`` seconds passed (the
        last verdict). Woken by the seal, by each vote (which moves a predicted deadline), by the alert's
        run node going, and at the deadline itself. For a script; a trigger uses :meth:`watch`."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            wake = threading.Event()
            woken = wake.set

            def poke(_event: Any, woken: Any = woken) -> None:
                woken()

            verdict = self.check(epoch, partition)
            delivered = verdict.alert is not None and verdict.alert.delivered_at is not None
            if verdict.state in ("in_time", "sealed_late", "no_deadline") or verdict.deliver \
                    or (delivered and not until_sealed):
                return verdict
            client = self.ctx.client
            if verdict.alert is not None and not delivered:  # another is delivering it: wait for it to finish
                running = DeadlinePaths(self.paths).late_alert_delivery(epoch, verdict.alert.generation, partition)
                if client.exists(running,
                                 watch=poke) is None:
                    continue
                pause = 5.0
            elif verdict.state == "not_open":  # woken when it opens, or at a deadline it may miss unopened
                opened = client.exists(self.paths.epoch(epoch), watch=poke)
                if opened is not None and verdict.forecast.generation == 0:
                    continue  # opened since the check saw no record (a rolled-back one waits for its change)
                pause = _REVISIT if verdict.deadline_at is None else max(0.0, verdict.deadline_at - self.ctx.clock())
            else:
                found = self.ctx.call(lambda call: epoch_record(call, self.ctx, epoch), what=f"read epoch {epoch}")
                if found is not None:  # woken by the seal, or by a rollback starting a new opening
                    client.exists(self.paths.epoch(epoch), watch=poke)
                    seal_path = self.paths.seal(epoch, found.record.generation, partition)
                    if client.exists(seal_path, watch=poke) is not None:
                        continue  # sealed since the check
                    if found.record.state == "open":  # every vote moves a predicted deadline: look again at each
                        with contextlib.suppress(NoNodeError):
                            client.get_children(self.paths.vote_counter(epoch, found.record.attempt, partition),
                                                watch=poke)
                pause = _REVISIT if delivered else max(0.0, (verdict.deadline_at or 0.0) - self.ctx.clock())
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    return verdict
                pause = min(pause, left)
            until = time.monotonic() + pause
            while not wake.is_set():  # a stop is heard within half a second, without reading anything
                left = until - time.monotonic()
                if left <= 0 or (stop is not None and stop.is_set()):
                    break
                wake.wait(left if stop is None else min(left, 0.5))
            if stop is not None and stop.is_set():
                return verdict


def late_alert(call: Call, path: str) -> Found[LateAlert] | None:
    """The late alert at ``path`` and its stat (for a compare-and-set of its marks), or None."""
    raw = call.get(path)
    return None if raw is None else Found(LateAlert.from_bytes(raw.data, path=path), raw.stat)


def _trim_alerts(call: Call, ctx: PipelineContext, through: int) -> int:
    pruned, _archived = prune_alerts(call, ctx, through)
    return pruned


# What this family hands retention: the statistics take the epochs' votes before they go, and the
# delivered late alerts of compacted epochs leave (archived first where there is an archive).
COMPACTION = CompactionStep("deadlines", before=fold_before_compaction, trim=_trim_alerts)
