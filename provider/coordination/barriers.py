"""Barriers inside an epoch, with declared straggler policies.

A barrier is a named point of an epoch ("both ingest jobs done before the join"). Participants are
registered (from the configuration in force at the epoch, or one by one before the barrier closes),
arrive, and wait. The costs are bounded:

- an arrival is one transaction of two creates (its arrival node and a sequential ticket whose
  number tells the arriver how many arrived before it), so it is O(1) writes whatever the size;
- only the arrival that completes the set (or a waiter whose deadline passed) reads the whole set
  and writes the release node;
- every waiter watches the one release node (no herd of watches on siblings, no N-squared watches).

Straggler policies, decided once and recorded with who was late:
``fail`` (after the timeout the barrier fails), ``quorum(k)`` (after the timeout it releases once k
participants arrived) and ``rerun`` (after the timeout the stragglers are reported so the caller can
run them again; the barrier stays closed until they arrive). Deadlines are wall-clock times written
at declaration (``declared_at + timeout``): keep clocks in sync within a small part of the timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.errors import (
    EpochNotOpen,
    InvalidInput,
    StateError,
)
from airflow_epochs.coordination.ledger import EpochLedger, _Conflict
from airflow_epochs.coordination.names import validate_epoch, validate_name
from airflow_epochs.coordination.paths import DEFAULT_ROOT
from airflow_epochs.coordination.session import Op, failed

PolicyKind = Literal["fail", "quorum", "rerun"]


class BarrierError(StateError):
    """Base class of barrier refusals."""


class BarrierNotDeclared(BarrierError):
    """The barrier has not been declared for this epoch."""


class BarrierConflict(BarrierError):
    """The barrier was declared already with another policy."""


class BarrierClosed(BarrierError):
    """The barrier has been released or failed; no more registrations."""


class UnknownParticipant(BarrierError):
    """The participant is not registered at the barrier."""


class BarrierFailed(BarrierError):
    """The barrier's ``fail`` policy fired: stragglers did not arrive in time."""

    def __init__(self, message: str, *, late: tuple[str, ...]) -> None:
        self.late = late
        super().__init__(message)


@dataclass(frozen=True)
class StragglerPolicy:
    """What happens when some participants have not arrived by ``timeout`` seconds after declaration."""

    kind: PolicyKind
    timeout: float
    k: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("fail", "quorum", "rerun"):
            raise InvalidInput(f"straggler policy must be fail, quorum or rerun, not {self.kind!r}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise InvalidInput(f"straggler timeout must be a positive number of seconds, not {self.timeout!r}")
        if self.kind == "quorum":
            if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
                raise InvalidInput(f"quorum needs a positive integer k, not {self.k!r}")
        elif self.k is not None:
            raise InvalidInput(f"only the quorum policy takes k (got k={self.k!r} for {self.kind})")

    @classmethod
    def fail(cls, timeout: float) -> StragglerPolicy:
        return cls("fail", timeout)

    @classmethod
    def quorum(cls, k: int, timeout: float) -> StragglerPolicy:
        return cls("quorum", timeout, k)

    @classmethod
    def rerun(cls, timeout: float) -> StragglerPolicy:
        return cls("rerun", timeout)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.kind, "timeout": float(self.timeout), "k": self.k}


@dataclass(frozen=True)
class BarrierOutcome:
    """How a barrier ended (or, for ``rerun``, who is late)."""

    decision: str  # "all" | "quorum" | "failed" | "rerun"
    released: bool
    arrived: tuple[str, ...]
    late: tuple[str, ...]
    zxid: int = 0


@dataclass(frozen=True)
class Arrival:
    """What one arrival found."""

    participant: str
    index: int  # 1 for the first arrival
    released: bool  # this arrival released the barrier
    after_release: bool  # the barrier had already been decided before this arrival
    outcome: BarrierOutcome | None


class Barrier:
    """One barrier of one epoch of a pipeline (the epoch must be open).

    :param client: a started kazoo client.
    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param name: barrier name.
    :param clock: wall clock for deadlines.
    """

    def __init__(
        self,
        client: KazooClient,
        pipeline: str,
        epoch: int,
        name: str,
        *,
        root: str = DEFAULT_ROOT,
        op_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = validate_name("barrier", name)
        self.epoch = validate_epoch(epoch)
        self.ledger = EpochLedger(client, pipeline, root=root, op_timeout=op_timeout, clock=clock)
        self.client = client
        self.session = self.ledger.session
        self._clock = clock
        self._base: str | None = None

    # -- paths -------------------------------------------------------------------------------

    def _path(self) -> str:
        if self._base is None:
            doc = self.ledger._epoch_doc(self.epoch)
            if doc["state"] == "rolled_back":
                raise EpochNotOpen(f"epoch {self.epoch} of {self.ledger.pipeline!r} was rolled back")
            self._base = f"{self.ledger.paths.generation(self.epoch, doc['generation'])}/barriers/{self.name}"
        return self._base

    def _child(self, kind: str, name: str = "") -> str:
        return f"{self._path()}/{kind}" + (f"/{name}" if name else "")

    # -- declaring and registering -----------------------------------------------------------

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

        def once() -> None:
            doc, _ = self.ledger._epoch_doc_stat(self.epoch)
            if doc["state"] != "open":
                raise EpochNotOpen(f"epoch {self.epoch} is {doc['state']}; barriers live in open epochs")
            base = self._path()
            existing = self.session.get(base)
            if existing is not None:
                current = payloads.decode("barrier", existing[0], path=base)
                if (current["policy"], current["timeout"], current.get("k")) != (
                    policy.kind, float(policy.timeout), policy.k
                ):
                    raise BarrierConflict(
                        f"barrier {self.name!r} of epoch {self.epoch} is declared with policy "
                        f"{current['policy']} (timeout {current['timeout']}, k {current.get('k')})"
                    )
                return
            expected = names
            if expected is None:
                config = self.ledger._config_version(doc["config_version"]).config
                expected = list(config.barriers.get(self.name, ()))
            now = self._clock()
            body = {**policy.to_json(), "declared_at": now, "deadline": now + float(policy.timeout),
                    "registered": len(expected), "closed": False}
            ops: list[Op] = [
                ("create", f"{self.ledger.paths.generation(self.epoch, doc['generation'])}/barriers", b"", False),
                ("create", base, payloads.encode("barrier", body), False),
                ("create", f"{base}/participants", b"", False),
                ("create", f"{base}/arrived", b"", False),
                ("create", f"{base}/tickets", b"", False),
                *[("create", f"{base}/participants/{p}", b"", False) for p in expected],
                self.ledger._event("barrier_declared", epoch=self.epoch, barrier=self.name,
                                   policy=policy.to_json(), participants=len(expected)),
            ]
            try:
                self._commit(ops)
            except _Conflict:
                # the shared "barriers" folder may exist already: retry without creating it
                ops.pop(0)
                self._commit(ops)

        self.ledger._cas(once, what=f"declare barrier {self.name!r}")

    def register(self, participant: str) -> None:
        """Add a participant before the barrier closes (idempotent)."""
        validate_name("producer", participant)

        def once() -> None:
            doc, stat = self._doc()
            if self.session.get(self._child("participants", participant)) is not None:
                return
            if doc["closed"]:
                raise BarrierClosed(f"barrier {self.name!r} of epoch {self.epoch} is closed; "
                                    f"{participant!r} cannot register")
            body = {**payloads.body(doc), "registered": doc["registered"] + 1}
            self._commit([
                ("create", self._child("participants", participant), b"", False),
                ("set", self._path(), payloads.encode("barrier", body), stat.version),
            ])

        self.ledger._cas(once, what=f"register {participant!r} at barrier {self.name!r}")

    # -- arriving and waiting ----------------------------------------------------------------

    def arrive(self, participant: str) -> Arrival:
        """Record that ``participant`` reached the barrier; O(1) writes. Idempotent per participant."""
        validate_name("producer", participant)

        def once() -> Arrival:
            doc, _ = self._doc()
            already = self.session.get(self._child("arrived", participant))
            if already is not None:
                outcome = self.outcome()
                return Arrival(participant, 0, False, outcome is not None and outcome.decision != "rerun", outcome)
            # One transaction: registered? + arrival node + ticket. A failed transaction consumes no
            # sequence number, so the ticket counts distinct arrivals.
            results = self.session.commit([
                ("check", self._child("participants", participant), -1),
                ("create", self._child("arrived", participant),
                 payloads.encode("arrival", {"at": self._clock()}), False),
                ("create", self._child("tickets", "t-"), b"", True),
            ])
            error = failed(results)
            if isinstance(error, NoNodeError):
                raise UnknownParticipant(
                    f"{participant!r} is not registered at barrier {self.name!r} of epoch {self.epoch}"
                )
            if isinstance(error, NodeExistsError):
                raise _Conflict()  # a concurrent arrival of the same participant: report it as a repeat
            if error is not None:
                raise error
            index = int(str(results[2]).rsplit("-", 1)[1]) + 1
            if doc["closed"]:
                return Arrival(participant, index, False, True, self.outcome())
            released = False
            now = self._clock()
            quorum_due = doc["policy"] == "quorum" and index >= int(doc["k"]) and now >= doc["deadline"]
            if index >= doc["registered"] or quorum_due:
                released = self._try_release() is not None
            return Arrival(participant, index, released, False, self.outcome() if released else None)

        return self.ledger._cas(once, what=f"arrive {participant!r} at barrier {self.name!r}")

    def wait(self, timeout: float | None = None) -> BarrierOutcome:
        """Block until the barrier is released (or the policy decides); returns the outcome.

        Raises :class:`BarrierFailed` when the ``fail`` policy fired, and returns a ``rerun`` outcome
        (``released=False``, the stragglers in ``late``) when the ``rerun`` policy's timeout passed.

        :param timeout: seconds to wait at most; :class:`TimeoutError` after that.
        """
        give_up = None if timeout is None else time.monotonic() + timeout
        changed = threading.Event()
        path = self._child("release")
        deadline = float(self._doc()[0]["deadline"])  # fixed at declaration: read it once
        while True:
            changed.clear()
            outcome = self._watch_release(path, changed)
            if outcome is None and self._clock() >= deadline:
                outcome = self._apply_policy()
            if outcome is not None:
                if outcome.decision == "failed":
                    raise BarrierFailed(
                        f"barrier {self.name!r} of epoch {self.epoch} failed: {list(outcome.late)} did not "
                        "arrive in time", late=outcome.late,
                    )
                return outcome
            until_deadline = max(0.0, deadline - self._clock())
            wait_for = until_deadline + 0.01
            if give_up is not None:
                remaining = give_up - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"barrier {self.name!r} of epoch {self.epoch}: not released in {timeout} s")
                wait_for = min(wait_for, remaining)
            changed.wait(wait_for)

    def on_release(self, callback: Callable[[BarrierOutcome], Any]) -> None:
        """Call ``callback(outcome)`` once the barrier is released or failed (from kazoo's thread).

        One watch on the release node; it is re-armed until the node exists. Straggler deadlines are
        applied by blocking waiters or arrivals, not by this callback.
        """
        path = self._child("release")
        fired = threading.Event()

        def check(_event: Any = None) -> None:
            if fired.is_set():
                return
            stat = self.client.exists(path, watch=check)
            if stat is not None:
                fired.set()
                outcome = self.outcome()
                if outcome is not None:
                    callback(outcome)

        check()

    def outcome(self) -> BarrierOutcome | None:
        """The decision, if the barrier was released or failed."""
        raw = self.session.get(self._child("release"))
        if raw is None:
            return None
        doc = payloads.decode("release", raw[0], path=self._child("release"))
        return BarrierOutcome(doc["decision"], doc["decision"] in ("all", "quorum"), tuple(doc["arrived"]),
                              tuple(doc["late"]), int(raw[1].czxid))

    def status(self) -> dict[str, Any]:
        """Registered and arrived participants, the stragglers so far, policy and deadline."""
        doc, _ = self._doc()
        registered = sorted(self.session.children(self._child("participants")) or [])
        arrived = sorted(self.session.children(self._child("arrived")) or [])
        return {"policy": doc["policy"], "k": doc.get("k"), "deadline": doc["deadline"], "closed": doc["closed"],
                "registered": registered, "arrived": arrived,
                "late": sorted(set(registered) - set(arrived))}

    # -- internals ---------------------------------------------------------------------------

    def _doc(self) -> tuple[dict[str, Any], Any]:
        raw = self.session.get(self._path())
        if raw is None:
            raise BarrierNotDeclared(f"barrier {self.name!r} is not declared for epoch {self.epoch}")
        return payloads.decode("barrier", raw[0], path=self._path()), raw[1]

    def _commit(self, ops: list[Op]) -> None:
        self.ledger._commit(ops)

    def _watch_release(self, path: str, changed: threading.Event) -> BarrierOutcome | None:
        if self.client.exists(path, watch=lambda _e: changed.set()) is None:
            return None
        return self.outcome()

    def _apply_policy(self) -> BarrierOutcome | None:
        """Past the deadline: let the policy decide (idempotently, whoever gets there first)."""
        doc, _ = self._doc()
        if doc["policy"] == "rerun":
            status = self.status()
            if not status["late"]:
                return self._try_release()
            report = {"decision": "rerun", "arrived": status["arrived"], "late": status["late"], "at": self._clock()}
            with contextlib.suppress(_Conflict):  # reported already: the report is recorded once
                self._commit([
                    ("create", self._child("report"), payloads.encode("release", report), False),
                    self.ledger._event("barrier_stragglers", epoch=self.epoch, barrier=self.name,
                                       late=status["late"], policy="rerun"),
                ])
            return BarrierOutcome("rerun", False, tuple(status["arrived"]), tuple(status["late"]))
        return self._try_release()

    def _try_release(self) -> BarrierOutcome | None:
        """Write the release if the state allows it now; returns the outcome or None."""

        def once() -> BarrierOutcome | None:
            doc, stat = self._doc()
            if doc["closed"]:
                return self.outcome()
            registered = set(self.session.children(self._child("participants")) or [])
            arrived = set(self.session.children(self._child("arrived")) or [])
            late = sorted(registered - arrived)
            past_deadline = self._clock() >= doc["deadline"]
            if not late and registered:
                decision = "all"
            elif doc["policy"] == "quorum" and past_deadline and len(arrived & registered) >= int(doc["k"]):
                decision = "quorum"
            elif doc["policy"] == "fail" and past_deadline:
                decision = "failed"
            else:
                return None
            release = {"decision": decision, "arrived": sorted(arrived), "late": late, "at": self._clock()}
            self._commit([
                # closing bumps the barrier's version, so a registration racing with it is refused
                ("set", self._path(), payloads.encode("barrier", {**payloads.body(doc), "closed": True}),
                 stat.version),
                ("create", self._child("release"), payloads.encode("release", release), False),
                self.ledger._event("barrier_released", epoch=self.epoch, barrier=self.name, decision=decision,
                                   late=late, arrived=len(arrived)),
            ])
            return self.outcome()

        return self.ledger._cas(once, what=f"release barrier {self.name!r}")
