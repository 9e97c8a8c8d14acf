"""The plain records the coordination core hands out: attempts, epoch states, votes, seals, snapshots
and history events. They are values: they carry no client and travel between processes as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidEpoch, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.wire.events import EventRecord, event_record

# The largest version number of a sealed (epoch, partition) (see recipes/corrections: a re-seal's versions).
MAX_VERSION_NUMBER = 1_000_000


@dataclass(frozen=True)
class Overtaken:
    """What happened to a committed request after it committed: set on the result a call returns when
    its request id is found committed but no longer current (see the outcome table, docs: reference/outcomes).

    :param change: ``superseded`` (another attempt took the epoch over), ``aborted``, ``rolled_back``,
        ``sealed`` (the epoch was sealed meanwhile, by this attempt or by the one that superseded it),
        ``taken_over`` (a lease passed to another owner), ``unregistered`` (a consumer left).
    :param current: the epoch's current attempt (or the lease's holder) now, when there is one.
    """

    change: str
    current: int | str | None = None

    def __str__(self) -> str:
        now = "" if self.current is None else f" (now: {self.current})"
        return f"committed, since {self.change.replace('_', ' ')}{now}"


@dataclass(frozen=True)
class Attempt:
    """One try at an epoch. ``token`` is its fencing token: only the current token may vote or seal.

    An attempt is plain data (``to_dict``/``from_dict``) so it can travel between the short-lived
    processes of one epoch (Airflow tasks, a Spark driver).

    :param request: the request id that opened this attempt (a repeat of that request returns it).
    :param opened_at: when the epoch (this generation) was opened; lets the vote that completes the
        epoch rewrite the epoch record without reading it first.
    :param session: the ZooKeeper session id it was obtained under, if obtained by a client in this
        process; once that session has expired, this process refuses to use the handle
        (:class:`~airflow_epochs.coordination.base.errors.SessionLost`). Kept by ``to_dict``/``from_dict``.
    """

    pipeline: str
    epoch: int
    token: int
    owner: str
    config_version: int
    generation: int
    request: str = ""
    opened_at: float | None = None
    session: int | None = field(default=None, compare=False)
    #: set when a repeated opening finds its attempt committed but no longer current
    overtaken: Overtaken | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "epoch": self.epoch,
            "token": self.token,
            "owner": self.owner,
            "config_version": self.config_version,
            "generation": self.generation,
            "request": self.request,
            "opened_at": self.opened_at,
            "session": None if self.session is None else f"{self.session:x}",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        if not isinstance(data, Mapping):
            raise InvalidEpoch(f"attempt data must be a mapping, not {type(data).__name__}")
        try:
            token = _positive_int("token", data["token"])
            config_version = _non_negative_int("config_version", data["config_version"])
            generation = _positive_int("generation", data["generation"])
            opened_at = data.get("opened_at")
            if opened_at is not None and (isinstance(opened_at, bool) or not isinstance(opened_at, (int, float))):
                raise InvalidEpoch(f"attempt opened_at must be a number, not {opened_at!r}")
            session = data.get("session")
            if session is not None:
                try:
                    session = int(str(session), 16)
                except ValueError:
                    raise InvalidEpoch(f"attempt session must be a hexadecimal session id, not {session!r}") from None
            request = data.get("request") or ""
            if not isinstance(request, str):
                raise InvalidEpoch(f"attempt request must be a string, not {request!r}")
            return cls(
                pipeline=validate_name("pipeline", data["pipeline"]),
                epoch=validate_epoch(data["epoch"]),
                token=token,
                owner=validate_name("owner", data["owner"]),
                config_version=config_version,
                generation=generation,
                request=request,
                opened_at=None if opened_at is None else float(opened_at),
                session=session,
            )
        except KeyError as exc:
            raise InvalidEpoch(f"attempt data lacks {exc.args[0]!r}: {dict(data)!r}") from None


def _positive_int(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidEpoch(f"attempt {what} must be a positive integer, not {value!r}")
    return value


def _non_negative_int(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidEpoch(f"attempt {what} must be a non-negative integer, not {value!r}")
    return value


@dataclass(frozen=True)
class EpochInfo:
    """The recorded state of one epoch."""

    epoch: int
    state: str  # "open" | "sealed" | "rolled_back"
    attempt: int
    attempt_state: str  # "running" | "aborted" | "superseded" | "sealed" | "rolled_back"
    owner: str
    config_version: int
    generation: int
    sealed_partitions: tuple[str, ...]
    partitions: tuple[str, ...]
    opened_at: float = 0.0
    sealed_at: float | None = None
    #: set on the answer of a close whose request sealed this epoch and which was rolled back since
    overtaken: Overtaken | None = field(default=None, compare=False)


@dataclass(frozen=True)
class VoteResult:
    """What a vote changed. ``partition_sealed``/``epoch_sealed`` say whether they are sealed now."""

    epoch: int
    partition: str
    producer: str
    attempt: int
    partition_sealed: bool
    epoch_sealed: bool
    duplicate: bool = False
    request: str = ""
    #: set when the vote committed under an attempt that is no longer current (its vote is never counted)
    overtaken: Overtaken | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SealRecord:
    """A partition's seal as one read gives it (no manifests): enough for waiters and triggers.

    The seal family (this, ``SealInfo``, the stored ``SealNode`` and the ``PartitionSealed``
    event) gives ``producers`` one meaning, the producers' names, and ``producer_count`` another,
    how many producers the seal counts."""

    epoch: int
    partition: str
    attempt: int
    generation: int
    sealed_at: float
    zxid: int
    request: str
    producer_count: int
    upstream: Mapping[str, int] = field(default_factory=dict)
    # lineage key of a partition of this pipeline -> the oldest version of it (at the epoch ``upstream``
    # names) any producer read; a key missing: some producer did not say (judged by when it read)
    read_versions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SealInfo:
    """A sealed partition: who voted, with which manifests, and the snapshot pointers it carries."""

    epoch: int
    partition: str
    attempt: int
    generation: int
    producers: tuple[str, ...]
    manifests: Mapping[str, Any]
    snapshots: Mapping[str, Any]
    sealed_at: float
    zxid: int
    # upstream pipeline -> newest epoch of it that any producer of this partition read
    upstream: Mapping[str, int] = field(default_factory=dict)

    @property
    def producer_count(self) -> int:
        """How many producers the seal counts (as ``SealRecord.producer_count``)."""
        return len(self.producers)


@dataclass(frozen=True)
class VoteRecord:
    """One producer's recorded vote: the attempt it was cast under, its manifest and snapshot pointer."""

    epoch: int
    partition: str
    producer: str
    attempt: int
    manifest: Any
    snapshot: Any
    request: str = ""
    voted_at: float = 0.0


@dataclass(frozen=True)
class SnapshotRef:
    """The snapshot a sealed epoch left for the next one."""

    epoch: int
    partition: str
    producer: str
    pointer: Any
    version: int = 1  # the version of the (epoch, partition) whose pointer this is (1: the original seal)


@dataclass(frozen=True)
class BarrierStatus:
    """A barrier as a status page shows it (``Barrier.status()``): its straggler policy (``k`` for a
    quorum), its deadline, whether it is decided (``closed``), and who registered, arrived and is
    late so far, each sorted."""

    policy: str
    k: int | None
    deadline: float
    closed: bool
    registered: tuple[str, ...]
    arrived: tuple[str, ...]
    late: tuple[str, ...]


@dataclass(frozen=True)
class Event:
    """One recorded state change; ``seq`` orders the history (it is also ZooKeeper's commit order)."""

    seq: int
    zxid: int
    event: str
    at: float
    detail: Mapping[str, Any]  # as stored: for a generic display; read its fields through ``record``

    @property
    def record(self) -> EventRecord:
        """The event's typed record (one per kind, from ``coordination/wire/events.py``;
        :class:`~airflow_epochs.coordination.CorruptPayload` when a field has the wrong type)."""
        return event_record(self.event, self.detail)


def check_upstream(upstream: Mapping[str, int] | None, *, limit: int) -> dict[str, int]:
    """Validate a lineage vector: upstream pipeline name -> epoch of it that was read."""
    if upstream is None:
        return {}
    if not isinstance(upstream, Mapping):
        raise InvalidInput(f"upstream must map pipeline names to epochs, not {type(upstream).__name__}")
    if len(upstream) > limit:
        raise InvalidInput(f"upstream names {len(upstream)} pipelines; at most {limit}")
    out: dict[str, int] = {}
    for name, epoch in upstream.items():
        validate_name("pipeline", name)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise InvalidInput(f"upstream epoch of {name!r} must be a non-negative integer, not {epoch!r}")
        out[name] = epoch
    return out


def check_read_versions(read_versions: Mapping[str, int] | None, upstream: Mapping[str, int], *,
                        pipeline: str) -> dict[str, int]:
    """Validate the versions a producer read: a lineage key of ``upstream`` that names a partition of
    ``pipeline`` (``"<pipeline>:<partition>"``) -> the version of it read at the epoch ``upstream`` names."""
    if read_versions is None:
        return {}
    if not isinstance(read_versions, Mapping):
        raise InvalidInput(f"read_versions must map lineage keys to version numbers, not "
                           f"{type(read_versions).__name__}")
    out: dict[str, int] = {}
    for key, version in read_versions.items():
        if not isinstance(key, str) or key not in upstream:
            raise InvalidInput(f"read_versions names {key!r}, which upstream does not name (a version is of the "
                               "epoch upstream names)")
        if not key.startswith(f"{pipeline}:"):
            raise InvalidInput(f"read_versions names {key!r}, not a partition of pipeline {pipeline!r} "
                               f"(only its own partitions have versions)")
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION_NUMBER:
            raise InvalidInput(f"read_versions[{key!r}] must be a version number in 1..{MAX_VERSION_NUMBER}, "
                               f"not {version!r}")
        out[key] = version
    return out
