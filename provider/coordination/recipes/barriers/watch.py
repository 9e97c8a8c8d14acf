"""The asynchronous wait for a barrier's decision, as a trigger runs it: one exists-watch on the release
node (a release before the deadline is "everyone arrived": nothing is read when it fires), and the
deadline, at which the straggler policy decides, once, by whoever gets there first.

The rare paths (the policy's decision at the deadline; a decision read near the deadline, where another
process's clock may already have let the policy decide; a compacted epoch's decision in the archive)
are short blocking calls of the :class:`~.barrier.Barrier` itself, run off the loop.
"""

from __future__ import annotations

import asyncio
import time

from kazoo.protocol.states import EventType, WatchedEvent

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.errors import EpochNotOpen
from airflow_epochs.coordination.recipes.barriers.barrier import Barrier
from airflow_epochs.coordination.recipes.barriers.records import BarrierNode, BarrierOutcome, BarrierPaths
from airflow_epochs.coordination.state.watches import epoch_generation

# Near the deadline another process's clock may already have let a policy decide: read, don't infer.
SKEW_MARGIN = 1.0


class BarrierWatch:
    """Wait for ``barrier``'s decision (``ledger.barrier(epoch, name).watch()``).

    :param barrier: the barrier, on a client whose store the checks are given.
    """

    def __init__(self, barrier: Barrier) -> None:
        self.barrier = barrier
        self.paths = barrier.ctx.paths
        self.generation: int | None = None
        self.deadline: float | None = None
        self._released = False
        self._decided: BarrierOutcome | None = None

    def _where(self) -> BarrierPaths:
        assert self.generation is not None
        return BarrierPaths(self.paths, self.barrier.epoch, self.generation, self.barrier.name)

    def on_watch(self, event: WatchedEvent) -> None:
        if self.generation is not None and event.type == EventType.CREATED and event.path == self._where().release:
            self._released = True

    def seconds_to_deadline(self) -> float | None:
        """Seconds until the policy may decide (None: not known yet); the caller calls :meth:`at_deadline` then."""
        return None if self.deadline is None else max(0.05, self.deadline - time.time())

    async def check(self, store: NodeStore, wake: Watch) -> BarrierOutcome | None:
        """The decision once there is one, else None (``wake`` is left on what must change first).

        :raises EpochNotOpen: the epoch is not open and its archive has no decision of this barrier.
        """
        if self._decided is not None:
            return self._decided
        if self.generation is None:
            self.generation = await epoch_generation(store, self.paths, self.barrier.epoch, None)
            if self.generation is None:
                # gone from ZooKeeper: an epoch compacted into its archive still has its decisions there
                archived = await asyncio.to_thread(self._archived)
                if archived is None:
                    raise EpochNotOpen(f"epoch {self.barrier.epoch} of {self.paths.pipeline!r} is not open: it has "
                                       "no barriers")
                return archived
        if self.deadline is None:
            path = self._where().barrier
            node = await store.get(path, wake)  # the barrier may be declared later
            if node is None:
                return None
            self.deadline = BarrierNode.from_bytes(node.data, path=path).deadline
        if not self._released and await store.exists(self._where().release, wake) is not None:
            self._released = True
        if self._released:
            if time.time() < self.deadline - SKEW_MARGIN:
                return BarrierOutcome("all", True, None, ())
            return await asyncio.to_thread(self._bound().outcome)
        return None

    async def at_deadline(self) -> None:
        """The deadline passed: let the policy decide (it reads who is late and records its decision)."""
        if self.deadline is not None and time.time() >= self.deadline:
            self._decided = await asyncio.to_thread(self._bound().apply_policy)

    def _bound(self) -> Barrier:
        """The barrier bound to the opening this watch found (a reopened epoch's barrier is another)."""
        return Barrier(self.barrier.ctx, self.barrier.epoch, self.barrier.name, generation=self.generation)

    def _archived(self) -> BarrierOutcome | None:
        try:
            return self.barrier.outcome()
        except EpochNotOpen:
            return None
