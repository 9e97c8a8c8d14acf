"""The values of a barrier: its straggler policy, how it ended, one arrival, the decoded record,
the znodes it lives in, and its refusals (the protocol is :mod:`.barriers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput, StateError
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.wire import payloads

PolicyKind = Literal["fail", "quorum", "rerun"]

# Stragglers a decision names (the first ones, sorted); the rest are counted. 100 names of at most 128
# characters keep a release or report, and the history event written with it, near 13 KB each, far
# below the payload limit (payloads.MAX_PAYLOAD_BYTES) even at MAX_PARTICIPANTS.
MAX_LATE_NAMED = 100


class BarrierError(StateError):
    """Base class of barrier refusals."""


class BarrierNotDeclared(BarrierError):
    """The barrier has not been declared for this epoch."""


class BarrierConflict(BarrierError):
    """The barrier was declared already with another policy."""


class BarrierClosed(BarrierError):
    """The barrier has been released or failed; no more registrations."""


class BarrierFull(BarrierError):
    """The barrier (or the epoch's barriers) reached its limit; nothing was written (docs: Bounded answers)."""


class UnknownParticipant(BarrierError):
    """The participant is not registered at the barrier."""


class BarrierFailed(BarrierError):
    """The barrier's ``fail`` policy fired: stragglers did not arrive in time."""

    def __init__(self, message: str, *, late: tuple[str, ...], late_count: int | None = None) -> None:
        self.late = late  # the first MAX_LATE_NAMED stragglers, sorted
        self.late_count = len(late) if late_count is None else late_count
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
    """How a barrier ended (or, for ``rerun``, who is late).

    ``arrived`` counts the arrivals; it is None when a waiter learned only that every participant
    arrived (it was woken by the release before the deadline and read nothing). ``late`` names the
    first :data:`MAX_LATE_NAMED` stragglers (sorted) and ``late_count`` counts them all (None: as many
    as ``late`` names); ``late_truncated`` says that some are not named.
    """

    decision: str  # "all" | "quorum" | "failed" | "rerun"
    released: bool
    arrived: int | None
    late: tuple[str, ...]
    zxid: int = 0
    late_count: int | None = None

    @property
    def stragglers(self) -> int:
        """How many participants were late (named or not)."""
        return len(self.late) if self.late_count is None else self.late_count

    @property
    def late_truncated(self) -> bool:
        """Whether some stragglers are counted but not named."""
        return self.stragglers > len(self.late)

    def late_text(self) -> str:
        """The stragglers for a message: the names, and how many more there are."""
        return late_text(self.late, self.stragglers)


def named_late(late: list[str]) -> tuple[tuple[str, ...], int]:
    """The stragglers a decision records: the first :data:`MAX_LATE_NAMED` of ``late`` sorted, and their count."""
    return tuple(sorted(late)[:MAX_LATE_NAMED]), len(late)


def late_text(late: tuple[str, ...], count: int) -> str:
    """``late`` for a message, with how many more stragglers were not named."""
    more = count - len(late)
    return f"{list(late)}" + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Arrival:
    """What one arrival found."""

    participant: str
    index: int  # how many had arrived with this arrival (1 for the first); 0 for a repeat
    released: bool  # the barrier is released (by this arrival or before it)
    after_release: bool  # the barrier had already been decided before this arrival
    outcome: BarrierOutcome | None


# -- the records in the barrier's znodes ------------------------------------------------------


@dataclass(frozen=True)
class BarrierNode:
    """A barrier record: its straggler policy, deadline, registered count, and whether it is decided."""

    policy: str
    timeout: float
    k: int | None
    declared_at: float
    deadline: float
    registered: int
    closed: bool = False

    def to_bytes(self) -> bytes:
        return payloads.encode("barrier", {
            "policy": self.policy, "timeout": self.timeout, "k": self.k, "declared_at": self.declared_at,
            "deadline": self.deadline, "registered": self.registered, "closed": self.closed})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> BarrierNode:
        doc = payloads.decode("barrier", raw, path=path)
        k = doc.get("k")
        return cls(str(doc["policy"]), float(doc["timeout"]), None if k is None else int(k),
                   float(doc.get("declared_at", 0.0)), float(doc["deadline"]), int(doc["registered"]),
                   bool(doc.get("closed")))


@dataclass(frozen=True)
class ArrivalNode:
    """One participant's arrival at a barrier: when, and under which request."""

    at: float
    request: str

    def to_bytes(self) -> bytes:
        return payloads.encode("arrival", {"at": self.at, "request": self.request})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ArrivalNode:
        doc = payloads.decode("arrival", raw, path=path)
        return cls(float(doc["at"]), str(doc["request"]))


@dataclass(frozen=True)
class ReleaseNode:
    """How a barrier was decided (release, failure, or a stragglers' report).

    ``late`` names at most the first few stragglers (sorted); ``late_count`` counts all of them, so a
    barrier of thousands of participants keeps its record far below the payload limit. A record
    written before the count existed has every straggler in ``late``: its count is their number.
    """

    decision: str  # "all" | "quorum" | "failed" | "rerun"
    arrived: int
    late: tuple[str, ...]
    at: float
    late_count: int | None = None  # None: every straggler is named

    @property
    def stragglers(self) -> int:
        return len(self.late) if self.late_count is None else self.late_count

    def to_bytes(self) -> bytes:
        return payloads.encode("release", {"decision": self.decision, "arrived": self.arrived,
                                           "late": list(self.late), "at": self.at,
                                           "late_count": self.stragglers,
                                           "late_truncated": self.stragglers > len(self.late)})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> ReleaseNode:
        doc = payloads.decode("release", raw, path=path)
        late = tuple(str(name) for name in doc["late"])
        count = doc.get("late_count", len(late))  # absent in records written before the bound
        if isinstance(count, bool) or not isinstance(count, int) or count < len(late):
            raise CorruptPayload(f"{path}: release payload field 'late_count' is {count!r}, expected an integer "
                                 f"of at least {len(late)} (the stragglers it names)")
        return cls(str(doc["decision"]), int(doc["arrived"]), late, float(doc["at"]), count)


@dataclass(frozen=True)
class BarrierRecord:
    """The decoded barrier record."""

    policy: str
    k: int | None
    timeout: float
    deadline: float
    registered: int
    closed: bool
    version: int
    node: BarrierNode


@dataclass(frozen=True)
class BarrierPaths:
    """The znodes of one barrier of one opening (generation) of an epoch::

        epochs/<epoch>/b-<generation>/<barrier>        the record: policy, deadline, registered, closed
            p/<participant>                            one registration
            a/<participant>                            one arrival (the folder's data version counts them)
            release | failed | report                  created once, with the decision
    """

    paths: PipelinePaths
    epoch: int
    generation: int
    name: str

    @property
    def folder(self) -> str:
        return f"{self.paths.epoch(self.epoch)}/b-{self.generation}"

    @property
    def barrier(self) -> str:
        return f"{self.folder}/{validate_name('barrier', self.name)}"

    @property
    def participants(self) -> str:
        return f"{self.barrier}/p"

    def participant(self, name: str) -> str:
        return f"{self.participants}/{validate_name('producer', name)}"

    @property
    def arrivals(self) -> str:
        return f"{self.barrier}/a"

    def arrival(self, name: str) -> str:
        return f"{self.arrivals}/{validate_name('producer', name)}"

    @property
    def release(self) -> str:
        """Created once, when the barrier lets its participants pass (all arrived, or a quorum)."""
        return f"{self.barrier}/release"

    @property
    def failed(self) -> str:
        """Created once, when the ``fail`` policy fires."""
        return f"{self.barrier}/failed"

    @property
    def report(self) -> str:
        """Created once, when the ``rerun`` policy reports the stragglers."""
        return f"{self.barrier}/report"
