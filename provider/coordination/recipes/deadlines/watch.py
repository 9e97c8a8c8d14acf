"""The asynchronous wait for a partition's deadline, as a trigger runs it: no thread is held while it
waits (hundreds of deadline watches share one triggerer, whose default thread pool has cpus + 4
threads), and the wait wakes on whatever can change the verdict:

- each vote of the partition (a child watch on the attempt's vote counter): a vote moves a predicted
  deadline, possibly earlier, so the deadline is computed again at every vote;
- the seal, and the epoch record (an opening, a rollback: a new opening is watched instead);
- the run node of an alert another watcher is delivering (its delivery goes on here if that watcher
  dies);
- and the deadline itself, as it stands after the last vote (a timer on the loop).

Each look is one short evaluation of :meth:`PartitionDeadlines.check` (the one alert is raised there,
at most once across watchers and deployments), run off the loop on a small pool of the family's own
(``EVALUATIONS``): a hundred watches whose deadline is the same second are evaluated together, and
none of them waits behind the loop's default pool, or holds it.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.recipes.deadlines.paths import DeadlinePaths
from airflow_epochs.coordination.wire.nodes import EpochNode

if TYPE_CHECKING:
    from airflow_epochs.coordination.recipes.deadlines.deadlines import PartitionDeadlines, Verdict

# Seconds between looks at an epoch that is not open and has no deadline yet (a watch wakes it sooner),
# and at an alert another watcher is delivering (its run node's watch wakes it sooner).
REVISIT = 30.0
DELIVERY_REVISIT = 5.0
# The evaluations' own threads: each runs one evaluation of a few ZooKeeper round trips, then is free.
EVALUATIONS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="epochs-deadline-check")


class DeadlineWatch:
    """Wait until ``partition`` of ``epoch`` is decided against its deadline
    (``ledger.deadlines().watch(epoch, partition)``).

    :param deadlines: the pipeline's deadlines, on the watcher's own owner (watchers that share a
        session are told apart by it).
    :param until_sealed: after a late partition's alert was delivered by another watcher, go on until
        it seals (its lateness is then recorded) instead of returning.
    """

    def __init__(self, deadlines: PartitionDeadlines, epoch: int, partition: str, *,
                 until_sealed: bool = False) -> None:
        self.deadlines = deadlines
        self.epoch = validate_epoch(epoch)
        self.partition = validate_name("partition", partition)
        self.until_sealed = until_sealed

    def decided(self, verdict: Verdict) -> bool:
        """Whether ``verdict`` ends the wait: sealed (in time or late), no deadline, an alert this
        watcher must deliver, or (unless ``until_sealed``) one another watcher delivered."""
        delivered = verdict.alert is not None and verdict.alert.delivered_at is not None
        return verdict.state in ("in_time", "sealed_late", "no_deadline") or verdict.deliver \
            or (delivered and not self.until_sealed)

    async def run(self, store: NodeStore, changed: asyncio.Event, wake: Watch, *,
                  stop: asyncio.Event | None = None) -> Verdict:
        """Wait for the verdict. ``wake`` is the watch callback that sets ``changed`` (on the loop);
        ``stop`` ends the wait early with the last verdict."""
        due = False
        while True:
            changed.clear()
            verdict = await asyncio.get_running_loop().run_in_executor(
                EVALUATIONS, functools.partial(self.deadlines.check, self.epoch, self.partition, due=due))
            if self.decided(verdict):
                return verdict
            pause = await self._arm(store, wake, verdict)
            if pause is None:
                continue  # it changed while the watches were being left
            waits = [asyncio.ensure_future(changed.wait())]
            if stop is not None:
                waits.append(asyncio.ensure_future(stop.wait()))
            try:
                await asyncio.wait(waits, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
            if stop is not None and stop.is_set():
                return verdict
            # the look at the deadline syncs first and reads once (a hundred watches of one deadline
            # look at the same moment: each round trip saved is saved a hundred times)
            due = verdict.deadline_at is not None and self.deadlines.ctx.clock() >= verdict.deadline_at

    async def _arm(self, store: NodeStore, wake: Watch, verdict: Verdict) -> float | None:
        """Leave the watches that can change ``verdict``; the seconds until the next look at the latest,
        or None to look again at once."""
        paths = self.deadlines.paths
        delivered = verdict.alert is not None and verdict.alert.delivered_at is not None
        if verdict.alert is not None and not delivered:  # another is delivering it: wait for it to finish
            running = DeadlinePaths(paths).late_alert_delivery(self.epoch, verdict.alert.generation, self.partition)
            return None if await store.exists(running, wake) is None else DELIVERY_REVISIT
        now = self.deadlines.ctx.clock()
        until_deadline = None if verdict.deadline_at is None else max(0.0, verdict.deadline_at - now)
        record = await store.get(paths.epoch(self.epoch), wake)  # an opening, a rollback, the seal
        if verdict.state == "not_open":  # woken when it opens, or at a deadline it may miss unopened
            if record is not None and verdict.forecast.generation == 0:
                return None  # opened since the check saw no record (a rolled-back one waits for its change)
            return REVISIT if until_deadline is None else until_deadline
        if record is not None:
            node = EpochNode.from_bytes(record.data, path=paths.epoch(self.epoch))
            if node.state != "rolled_back":
                if await store.exists(paths.seal(self.epoch, node.generation, self.partition), wake) is not None:
                    return None  # sealed since the check
                if node.state == "open":  # every vote moves a predicted deadline: look again at each
                    await store.children(paths.vote_counter(self.epoch, node.attempt, self.partition), wake)
        if delivered or until_deadline is None:
            return REVISIT
        return until_deadline
