"""A barrier's state: its record, its decision (release, failure or a straggler report) and its
status, and the straggler policy deciding after the deadline, by whoever looks first. Release and
failure both close the record in the same transaction, so at most one of them happens.
:class:`~.barriers.Barrier` adds the participants' side (declare, register, arrive, wait)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import EpochNotOpen
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.coordination.base.steps import Create, SetData
from airflow_epochs.coordination.recipes.barrier_values import (
    BarrierNotDeclared,
    BarrierOutcome,
    BarrierPaths,
    BarrierRecord,
    named_late,
)
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record
from airflow_epochs.coordination.wire.events import BarrierReleased, BarrierStragglers
from airflow_epochs.coordination.wire.recipe_nodes import BarrierNode, ReleaseNode
from airflow_epochs.coordination.wire.records import BarrierStatus


class BarrierState:
    """A barrier's record and decisions: what a participant, a waiter or a status page reads, and the
    straggler policy's decision, written by whoever looks first after the deadline.

    :param client: a started kazoo client.
    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param name: barrier name.
    :param generation: the epoch's opening (from the attempt); read from the epoch record if None.
    :param clock: wall clock for deadlines.
    """

    def __init__(
        self,
        client: KazooClient,
        pipeline: str,
        epoch: int,
        name: str,
        *,
        generation: int | None = None,
        root: str = DEFAULT_ROOT,
        op_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = validate_name("barrier", name)
        self.epoch = validate_epoch(epoch)
        self.ctx = PipelineContext(client, pipeline, root=root, op_timeout=op_timeout, clock=clock)
        self.pipeline = pipeline
        self.client = client
        self.session = self.ctx.session
        self._clock = clock
        self._generation = generation
        self._deadline: float | None = None

    def generation(self, call: Call) -> int:
        """The epoch's current opening (read once)."""
        if self._generation is None:
            found = epoch_record(call, self.ctx, self.epoch)
            if found is None:
                raise EpochNotOpen(f"epoch {self.epoch} of {self.pipeline!r} has not been opened")
            if found[0].state == "rolled_back":
                raise EpochNotOpen(f"epoch {self.epoch} of {self.pipeline!r} was rolled back")
            self._generation = found[0].generation
        return self._generation

    def _paths(self, call: Call) -> BarrierPaths:
        return BarrierPaths(self.ctx, self.epoch, self.generation(call), self.name)

    def record(self) -> BarrierRecord:
        """The barrier record (policy, deadline, registered count, decided or not)."""
        return self.ctx.call(self._record, what=f"read barrier {self.name!r}")

    def _record(self, call: Call, watch: Callable[[Any], Any] | None = None) -> BarrierRecord:
        path = self._paths(call).barrier
        raw = call.get(path, watch=watch)
        if raw is None:
            raise BarrierNotDeclared(f"barrier {self.name!r} is not declared for epoch {self.epoch}")
        node = BarrierNode.from_bytes(raw[0], path=path)
        self._deadline = node.deadline  # fixed at declaration: a later wait() need not read it
        return BarrierRecord(node.policy, node.k, node.timeout, node.deadline, node.registered, node.closed,
                             raw[1].version, node)

    def _quorum_due(self, record: BarrierRecord, count: int) -> bool:
        return record.policy == "quorum" and record.k is not None and count >= int(record.k) \
            and self._clock() >= record.deadline

    def outcome(self) -> BarrierOutcome | None:
        """The decision, if the barrier was released, failed, or reported stragglers."""
        return self.ctx.call(self._outcome, what=f"read the outcome of barrier {self.name!r}")

    def _outcome(self, call: Call) -> BarrierOutcome | None:
        try:
            return self._decision(call)
        except EpochNotOpen:
            # with an archive's short window a sealed epoch leaves ZooKeeper when the next one opens:
            # its barriers' decisions are then read from the archive, as every other read of it is
            past = archived_call(call, self.ctx, self.epoch)
            if past is None:
                raise
            return self._decision(past)

    def _decision(self, call: Call) -> BarrierOutcome | None:
        paths = self._paths(call)
        for path in (paths.release, paths.failed, paths.report):
            raw = call.get(path)
            if raw is not None:
                node = ReleaseNode.from_bytes(raw[0], path=path)
                return BarrierOutcome(node.decision, node.decision in ("all", "quorum"), node.arrived, node.late,
                                      int(raw[1].czxid), node.stragglers)
        return None

    def status(self) -> BarrierStatus:
        """Registered and arrived participants, the stragglers so far, policy and deadline (reads every
        participant: for status pages, not for the participants themselves)."""

        def run(call: Call) -> BarrierStatus:
            record = self._record(call)
            paths = self._paths(call)
            registered = sorted(call.children(paths.participants) or [])
            arrived = sorted(call.children(paths.arrivals) or [])
            return BarrierStatus(record.policy, record.k, record.deadline, record.closed, tuple(registered),
                                 tuple(arrived), tuple(sorted(set(registered) - set(arrived))))

        return self.ctx.call(run, what=f"read the status of barrier {self.name!r}")

    def apply_policy(self) -> BarrierOutcome | None:
        """Past the deadline: let the policy decide (idempotently, whoever gets there first)."""
        return self.ctx.call(self._apply_policy, what=f"apply the policy of barrier {self.name!r}")

    def _apply_policy(self, call: Call) -> BarrierOutcome | None:
        record = self._record(call)
        if record.policy == "rerun" and not record.closed and self._clock() >= record.deadline:
            paths = self._paths(call)
            registered = set(call.children(paths.participants) or [])
            arrived = set(call.children(paths.arrivals) or [])
            named, count = named_late(list(registered - arrived))
            if not count:
                return self._decide(call)
            if call.exists(paths.report) is None:
                report = ReleaseNode("rerun", len(arrived & registered), named, self._clock(), count)
                failure = call.try_commit([
                    Create(paths.report, report.to_bytes()),
                    *self.ctx.event(BarrierStragglers(epoch=self.epoch, barrier=self.name, late=named,
                                    late_count=count, policy="rerun")),
                ])
                if failure is not None and not isinstance(failure.error, NodeExistsError):
                    raise failure.error
            return BarrierOutcome("rerun", False, len(arrived & registered), named, 0, count)
        return self._decide(call)

    def _decide(self, call: Call, known: tuple[BarrierRecord, int] | None = None) -> BarrierOutcome | None:
        """Write the release (or the failure) if the state allows it now; returns the outcome or None.

        :param known: the record and arrival count the caller just read and committed against (the
            completing arrival's), used for the first round instead of reading them again.
        """
        for _ in range(50):
            if known is not None:
                record, count = known
                known = None
            else:
                record = self._record(call)
                count = int(call.exists(self._paths(call).arrivals).version)
            if record.closed:
                return self._outcome(call)
            paths = self._paths(call)
            past_deadline = self._clock() >= record.deadline
            named: tuple[str, ...] = ()
            count_late = 0
            if count >= record.registered and record.registered > 0:
                decision = "all"
            elif record.policy == "quorum" and past_deadline and record.k is not None and count >= int(record.k):
                decision = "quorum"
            elif record.policy == "fail" and past_deadline:
                decision = "failed"
            else:
                return None
            if decision != "all":  # the rare path: name the stragglers
                registered = set(call.children(paths.participants) or [])
                named, count_late = named_late(list(registered - set(call.children(paths.arrivals) or [])))
            release = ReleaseNode(decision, count, named, self._clock(), count_late)
            target = paths.failed if decision == "failed" else paths.release
            failure = call.try_commit([
                # closing bumps the record's version: a racing registration or arrival recounts
                SetData(paths.barrier, replace(record.node, closed=True).to_bytes(), record.version),
                Create(target, release.to_bytes()),
                *self.ctx.event(BarrierReleased(epoch=self.epoch, barrier=self.name, decision=decision,
                                late=named, late_count=count_late, arrived=count)),
            ])
            if failure is None:
                return BarrierOutcome(decision, decision != "failed", count, named, 0, count_late)
        return self._outcome(call)
