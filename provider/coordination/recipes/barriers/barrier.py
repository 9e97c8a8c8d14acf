"""Barriers inside an epoch, with declared straggler policies.

A barrier is a named point of an epoch ("both ingest jobs done before the join"). Participants are
registered (from the configuration in force at the epoch, or one by one before the barrier is
decided), arrive, and wait. On the happy path each participant costs three requests and O(1) bytes,
whatever the number of participants:

1. one read of the barrier record (registered count, deadline, version);
2. one transaction: the participant is registered (``check``), the record is unchanged (``check``:
   no registration or decision raced with it), its arrival znode is created (create-only: an
   arrival counts once) and the arrivals folder's version is bumped (the new version is the number
   of arrivals, so exactly one arrival learns that it completed the set);
3. an exists-watch on the release znode, which wakes the waiter when it is created; nothing is read
   on wake. The arrival that completes the set creates the release znode instead (its third request)
   and does not wait.

Straggler policies are decided once, after the deadline (``declared_at + timeout``, wall clock),
by whoever looks first, and recorded with who was late: ``fail`` creates the ``failed`` znode,
``quorum(k)`` releases once k participants arrived, ``rerun`` reports the stragglers (``report``) and
leaves the barrier open for them. A decision names the first ``MAX_LATE_NAMED`` stragglers (sorted)
and counts the rest, so its record stays small at any number of participants. Release and failure
both close the record in the same transaction, so at most one of them happens. Keep clocks in sync
within a small part of the timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import EpochNotOpen, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.steps import Check, Create, SetData, Step, first_failure
from airflow_epochs.coordination.recipes.barriers.records import (
    MAX_LATE_NAMED,
    Arrival,
    ArrivalNode,
    BarrierClosed,
    BarrierConflict,
    BarrierError,
    BarrierFailed,
    BarrierFull,
    BarrierNode,
    BarrierNotDeclared,
    BarrierOutcome,
    BarrierPaths,
    BarrierRecord,
    PolicyKind,
    ReleaseNode,
    StragglerPolicy,
    UnknownParticipant,
    named_late,
)
from airflow_epochs.coordination.state.archive import archived_call
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import epoch_record
from airflow_epochs.coordination.wire.events import BarrierDeclared, BarrierReleased, BarrierStragglers
from airflow_epochs.coordination.wire.records import BarrierStatus

if TYPE_CHECKING:
    from airflow_epochs.coordination.recipes.barriers.watch import BarrierWatch

__all__ = ["MAX_BARRIERS", "MAX_LATE_NAMED", "MAX_PARTICIPANTS", "Arrival", "Barrier", "BarrierClosed",
           "BarrierConflict", "BarrierError", "BarrierFailed", "BarrierFull",
           "BarrierNotDeclared", "BarrierOutcome", "BarrierRecord", "PolicyKind", "StragglerPolicy",
           "UnknownParticipant"]

# Participants one barrier may have, and barriers one opening of an epoch may have: the listings of
# ``p``, ``a`` and ``b-<generation>`` (names of at most 128 characters, 4 bytes of length each) stay
# under 4096 x 132 bytes and 256 x 132 bytes (docs: Bounded answers).
MAX_PARTICIPANTS = 4096
MAX_BARRIERS = 256

# Near the deadline another process's clock may already have let a policy decide: read, don't infer.
_SKEW_MARGIN = 1.0


class Barrier:
    """One barrier of one opening of an epoch of a pipeline (the epoch must be open to declare it):
    its record and decisions (what a participant, a waiter or a status page reads, and the straggler
    policy's decision, written by whoever looks first after the deadline), and the participants' side
    (declare, register, arrive, wait). Bound to a ledger as ``ledger.barrier(epoch, name)``.

    :param ctx: the pipeline's context (its client, paths, session and clock).
    :param epoch: the epoch.
    :param name: barrier name.
    :param generation: the epoch's opening (from the attempt); read from the epoch record if None.
    """

    def __init__(self, ctx: PipelineContext, epoch: int, name: str, *, generation: int | None = None) -> None:
        self.name = validate_name("barrier", name)
        self.epoch = validate_epoch(epoch)
        self.ctx = ctx
        self.pipeline = ctx.pipeline
        self.client = ctx.client
        self.session = ctx.session
        self._clock = ctx.clock
        self._generation = generation
        self._deadline: float | None = None

    def generation(self, call: Call) -> int:
        """The epoch's current opening (read once)."""
        if self._generation is None:
            found = epoch_record(call, self.ctx, self.epoch)
            if found is None:
                raise EpochNotOpen(f"epoch {self.epoch} of {self.pipeline!r} has not been opened")
            if found.record.state == "rolled_back":
                raise EpochNotOpen(f"epoch {self.epoch} of {self.pipeline!r} was rolled back")
            self._generation = found.record.generation
        return self._generation

    def _paths(self, call: Call) -> BarrierPaths:
        return BarrierPaths(self.ctx.paths, self.epoch, self.generation(call), self.name)

    def record(self) -> BarrierRecord:
        """The barrier record (policy, deadline, registered count, decided or not)."""
        return self.ctx.call(self._record, what=f"read barrier {self.name!r}")

    def _record(self, call: Call, watch: Callable[[Any], Any] | None = None) -> BarrierRecord:
        path = self._paths(call).barrier
        raw = call.get(path, watch=watch)
        if raw is None:
            raise BarrierNotDeclared(f"barrier {self.name!r} is not declared for epoch {self.epoch}")
        node = BarrierNode.from_bytes(raw.data, path=path)
        self._deadline = node.deadline  # fixed at declaration: a later wait() need not read it
        return BarrierRecord(node.policy, node.k, node.timeout, node.deadline, node.registered, node.closed,
                             raw.stat.version, node)

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
                node = ReleaseNode.from_bytes(raw.data, path=path)
                return BarrierOutcome(node.decision, node.decision in ("all", "quorum"), node.arrived, node.late,
                                      int(raw.stat.czxid), node.stragglers)
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

    # -- the participants' side ------------------------------------------------------------------

    def declare(self, policy: StragglerPolicy, participants: Iterable[str] | None = None) -> None:
        """Create the barrier with its policy and first participants; idempotent for the same policy.

        :param participants: the expected participants; None takes them from the configuration in
            force at the epoch (``barriers`` section), or starts empty for purely dynamic registration.
        """
        if not isinstance(policy, StragglerPolicy):
            raise InvalidInput(f"policy must be a StragglerPolicy, not {type(policy).__name__}")
        names = None if participants is None else [validate_name("producer", p) for p in participants]
        if names is not None and len(set(names)) != len(names):
            raise InvalidInput(f"participants of barrier {self.name!r} are listed more than once: {names}")
        if names is not None and len(names) > MAX_PARTICIPANTS:
            raise InvalidInput(f"barrier {self.name!r}: {len(names)} participants; at most {MAX_PARTICIPANTS}")

        def body(call: Call) -> None:
            found = epoch_record(call, self.ctx, self.epoch)
            if found is None or found.record.state != "open":
                state = found.record.state if found else "not opened"
                raise EpochNotOpen(f"epoch {self.epoch} is {state}; barriers live in open epochs")
            self._generation = found.record.generation
            paths = self._paths(call)
            existing = call.get(paths.barrier)
            if existing is not None:
                current = BarrierNode.from_bytes(existing.data, path=paths.barrier)
                if (current.policy, current.timeout, current.k) != (policy.kind, float(policy.timeout), policy.k):
                    raise BarrierConflict(
                        f"barrier {self.name!r} of epoch {self.epoch} is declared with policy {current.policy} "
                        f"(timeout {current.timeout}, k {current.k}); nothing was written"
                    )
                return None
            expected = names
            if expected is None:
                config = self.ctx.config(call, found.record.config_version).config
                expected = list(config.barriers.get(self.name, ()))
            now = self._clock()
            declared = BarrierNode(policy.kind, float(policy.timeout), policy.k, now, now + float(policy.timeout),
                                   len(expected))
            ops: list[Step] = []
            folder = call.exists(paths.folder)
            if folder is None:
                ops.append(Create(paths.folder))
            elif int(folder.numChildren) >= MAX_BARRIERS:
                raise BarrierFull(f"epoch {self.epoch} has {folder.numChildren} barriers; at most {MAX_BARRIERS}: "
                                  f"barrier {self.name!r} was not declared; nothing was written")
            else:
                # bumping the folder's version serialises declarations, so none passes the limit
                ops.append(SetData(paths.folder, b"", int(folder.version)))
            ops += [
                Create(paths.barrier, declared.to_bytes()),
                Create(paths.participants),
                Create(paths.arrivals),
                *[Create(paths.participant(p)) for p in expected],
                *self.ctx.event(BarrierDeclared(epoch=self.epoch, barrier=self.name, policy=policy.to_json(),
                                participants=len(expected))),
            ]
            if call.try_commit(ops) is not None:
                raise Conflict()  # declared (or the folder created) meanwhile: look again
            return None

        self.ctx.call(body, what=f"declare barrier {self.name!r}")

    def register(self, participant: str) -> None:
        """Add a participant before the barrier is decided (idempotent)."""
        validate_name("producer", participant)

        def body(call: Call) -> None:
            record = self._record(call)
            paths = self._paths(call)
            if call.exists(paths.participant(participant)) is not None:
                return None
            if record.closed:
                raise BarrierClosed(f"barrier {self.name!r} of epoch {self.epoch} is decided; {participant!r} "
                                    "cannot register; nothing was written")
            if record.registered >= MAX_PARTICIPANTS:
                # the record's version is checked below: no concurrent registration passes the limit
                raise BarrierFull(f"barrier {self.name!r} of epoch {self.epoch} has {record.registered} "
                                  f"participants; at most {MAX_PARTICIPANTS}: {participant!r} was not registered; "
                                  "nothing was written")
            failure = call.try_commit([
                Create(paths.participant(participant)),
                # bumping the record's version refuses an arrival that counted without this participant
                SetData(paths.barrier, replace(record.node, registered=record.registered + 1).to_bytes(),
                        record.version),
            ])
            if failure is not None:
                raise Conflict()
            return None

        self.ctx.call(body, what=f"register {participant!r} at barrier {self.name!r}")

    def arrive(self, participant: str) -> Arrival:
        """Record that ``participant`` reached the barrier (two requests, O(1) bytes); idempotent.

        The arrival that completes the set releases the barrier; so does a repeat of it, if the
        release was not written (say, its process died in between).
        """
        validate_name("producer", participant)

        def body(call: Call) -> Arrival:
            record = self._record(call)
            paths = self._paths(call)
            registered = Check(paths.participant(participant))
            arrival = Create(paths.arrival(participant), ArrivalNode(self._clock(), call.request_id).to_bytes())
            counter = SetData(paths.arrivals, b"")
            steps: list[Step] = [registered, Check(paths.barrier, record.version), arrival, counter]
            results = call.commit(steps)
            failure = first_failure(steps, results)
            if failure is not None:
                error = failure.error
                if failure.step is registered and isinstance(error, NoNodeError):
                    raise UnknownParticipant(
                        f"{participant!r} is not registered at barrier {self.name!r} of epoch {self.epoch}; "
                        "nothing was written"
                    )
                if failure.step is arrival and isinstance(error, NodeExistsError):
                    return self._repeat(call, participant, record)
                if isinstance(error, (BadVersionError, NoNodeError)):
                    raise Conflict()  # a registration or a decision came first: count again
                raise error
            count = int(results[steps.index(counter)].version)  # the counter's version counts the arrivals
            if record.closed:
                return Arrival(participant, count, self._outcome(call) is not None, True, self._outcome(call))
            if count >= record.registered or self._quorum_due(record, count):
                outcome = self._decide(call, known=(record, count))
                return Arrival(participant, count, bool(outcome and outcome.released), False, outcome)
            return Arrival(participant, count, False, False, None)

        def find(call: Call) -> Arrival | None:
            path = self._paths(call).arrival(participant)
            raw = call.get(path)
            if raw is None or ArrivalNode.from_bytes(raw.data, path=path).request != call.request_id:
                return None
            record = self._record(call)
            count = int(call.exists(self._paths(call).arrivals).version)
            outcome = self._outcome(call)
            if outcome is None and (count >= record.registered or self._quorum_due(record, count)):
                outcome = self._decide(call)
            return Arrival(participant, count, bool(outcome and outcome.released), False, outcome)

        return self.ctx.call(body, what=f"arrive {participant!r} at barrier {self.name!r}", find=find)

    def _repeat(self, call: Call, participant: str, record: BarrierRecord) -> Arrival:
        outcome = self._outcome(call)
        if outcome is None and not record.closed:
            count = int(call.exists(self._paths(call).arrivals).version)
            if count >= record.registered or self._quorum_due(record, count):
                outcome = self._decide(call)
        decided_before = outcome is not None and outcome.decision != "rerun"
        return Arrival(participant, 0, bool(outcome and outcome.released), decided_before, outcome)

    def wait(self, timeout: float | None = None) -> BarrierOutcome:
        """Block until the barrier is released (or the policy decides); returns the outcome.

        One exists-watch on the release znode; nothing is read when it fires. Raises
        :class:`BarrierFailed` when the ``fail`` policy fired, and returns a ``rerun`` outcome
        (``released=False``, the stragglers in ``late``) when the ``rerun`` policy's timeout passed.

        :param timeout: seconds to wait at most; :class:`TimeoutError` after that.
        """
        give_up = None if timeout is None else time.monotonic() + timeout
        released = threading.Event()
        state: dict[str, Any] = {}

        def arm(call: Call) -> bool:
            paths = self._paths(call)
            if "deadline" not in state:
                state["deadline"] = self._deadline if self._deadline is not None else self._record(call).deadline
            return call.exists(paths.release, watch=lambda _event: released.set()) is not None

        if self.ctx.call(arm, what=f"watch barrier {self.name!r}"):
            released.set()
        while True:
            if released.is_set():
                if self._clock() < state["deadline"] - _SKEW_MARGIN:
                    # Before the deadline only "everyone arrived" can release: nothing to read.
                    return BarrierOutcome("all", True, None, ())
                return self._released_outcome()
            if self._clock() >= state["deadline"]:
                outcome = self.apply_policy()
                if outcome is not None:
                    return self._raise_failed(outcome)
            wait_for = max(0.0, state["deadline"] - self._clock()) + 0.01
            if give_up is not None:
                remaining = give_up - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"barrier {self.name!r} of epoch {self.epoch}: not released in {timeout} s")
                wait_for = min(wait_for, remaining)
            if released.wait(wait_for):
                continue
            # a reconnect may have lost the watch's event: look again (and re-arm)
            if self.ctx.call(arm, what=f"watch barrier {self.name!r}"):
                released.set()

    def _released_outcome(self) -> BarrierOutcome:
        outcome = self.outcome()
        assert outcome is not None
        return self._raise_failed(outcome)

    def _raise_failed(self, outcome: BarrierOutcome) -> BarrierOutcome:
        if outcome.decision == "failed":
            raise BarrierFailed(
                f"barrier {self.name!r} of epoch {self.epoch} failed: {outcome.late_text()} did not arrive in time",
                late=outcome.late, late_count=outcome.stragglers,
            )
        return outcome

    def on_release(self, callback: Callable[[BarrierOutcome], Any]) -> None:
        """Call ``callback(outcome)`` once the barrier is released or failed (from kazoo's thread).

        Watches on the release and failure znodes, re-armed until one exists. Straggler deadlines
        are applied by blocking waiters, arrivals or triggers, not by this callback.
        """
        fired = threading.Event()
        paths = self.ctx.call(self._paths, what="read the barrier's epoch")

        def check(_event: Any = None) -> None:
            if fired.is_set():
                return
            for path in (paths.release, paths.failed):
                if self.client.exists(path, watch=check) is not None:
                    fired.set()
                    outcome = self.outcome()
                    if outcome is not None:
                        callback(outcome)
                    return

        check()

    def watch(self) -> BarrierWatch:
        """The asynchronous wait for this barrier's decision, as a trigger runs it (see
        :mod:`airflow_epochs.coordination.recipes.barriers.watch`)."""
        from airflow_epochs.coordination.recipes.barriers.watch import BarrierWatch  # it builds on this module

        return BarrierWatch(self)
