"""The view model of a pipeline: what ``airflow-epochs status``, the timeline and the Epochs page show.

Plain frozen dataclasses, filled by :mod:`airflow_epochs.views.pipeline` from ZooKeeper and rendered by
the CLI (:mod:`airflow_epochs.views.status`) and the page (:mod:`airflow_epochs.ui.app`, as JSON through
:func:`as_json`). No ZooKeeper and no Airflow here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from airflow_epochs.coordination.wire.manifests import manifest_totals

#: the states an epoch (and a cell of the grid) is shown in
STATES = ("sealed", "voting", "open", "aborted", "rolled_back")


@dataclass(frozen=True)
class Cell:
    """One partition of one epoch in the grid."""

    partition: str
    state: str  # sealed | voting | open | aborted | rolled_back
    votes: int  # votes cast by the epoch's current attempt (all producers once sealed)
    needed: int  # producers registered for the partition at that epoch


@dataclass(frozen=True)
class EpochRow:
    """One epoch in the grid."""

    epoch: int
    state: str  # sealed | voting | open | aborted | rolled_back
    attempt: int
    attempt_state: str
    owner: str
    config_version: int
    generation: int
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Counts:
    """How many epochs are in each state (from the three ranges, not from reading each epoch)."""

    total: int = 0
    sealed: int = 0
    voting: int = 0
    open: int = 0
    aborted: int = 0
    rolled_back: int = 0


@dataclass(frozen=True)
class BarrierView:
    """A barrier of an epoch: who arrived, who is late, how it ended."""

    epoch: int
    name: str
    declared: bool
    policy: str | None
    deadline: float | None
    registered: tuple[str, ...]
    arrived: tuple[str, ...]
    stragglers: tuple[str, ...]  # a decided barrier names the first 100 (sorted); ``late`` counts them all
    decision: str | None  # all | quorum | failed | rerun, or None while waiting
    late: int | None = None  # how many were late (None: as many as ``stragglers`` names)

    @property
    def unnamed(self) -> int:
        """Stragglers the decision counted without naming them."""
        return 0 if self.late is None else max(0, self.late - len(self.stragglers))


@dataclass(frozen=True)
class Overview:
    """The head of a pipeline's page."""

    pipeline: str
    first_epoch: int
    frontier: int
    newest_epoch: int
    last_epoch: int  # newest epoch ever opened, rolled-back ones included
    partitions: tuple[str, ...]  # of the configuration in force after the frontier
    leader: str | None
    leader_until: str | None  # ISO UTC
    leader_expired: bool
    leader_since: float | None  # epoch seconds, when the lease holder took it (None: no leader)
    in_flight: EpochRow | None  # the epoch being worked on, with its current attempt
    lag_epochs: int  # epochs opened but not sealed
    last_seal_at: float | None
    counts: Counts
    barriers: tuple[BarrierView, ...]  # of the epoch in flight
    consumers: dict[str, int]  # backpressure: consumer -> acknowledged epoch
    read_ms: float


@dataclass(frozen=True)
class GridPage:
    """A page of the grid, newest epoch first."""

    pipeline: str
    offset: int
    limit: int
    matching: int  # epochs matching the filter (all pages)
    states: tuple[str, ...]
    partitions: tuple[str, ...]  # grid columns: every partition of the epochs on the page
    rows: tuple[EpochRow, ...]
    read_ms: float


@dataclass(frozen=True)
class VoteView:
    producer: str
    voted: bool
    attempt: int | None
    current: bool  # cast by the epoch's current attempt (only those count)
    summary: dict[str, Any]
    manifest: str  # JSON, shortened
    snapshot: Any


@dataclass(frozen=True)
class PartitionDetail:
    """A partition of an epoch, in the style of a checkpoint table row."""

    partition: str
    state: str
    votes: int
    needed: int
    producers: tuple[VoteView, ...]
    sealed_by: int | None
    sealed_at: float | None
    seconds_to_seal: float | None
    summary: dict[str, Any]  # rows / bytes / files over the producers' manifests
    snapshots: dict[str, Any]
    lineage: dict[str, int]  # upstream pipeline -> epoch read
    # the predicted seal and the deadline (:func:`airflow_epochs.views.deadlines.partition_deadline`)
    deadline: dict[str, Any] | None = None
    # the newest sealed version shown (1 unless re-sealed; manifests, snapshots and lineage are its),
    # the correction that re-sealed it and when (the version before it is stale since), and the
    # correction re-producing a newer version now ("": none; the shown version is stale meanwhile)
    version: int = 1
    correction: str = ""
    resealed_at: float | None = None
    stale_by: str = ""


@dataclass(frozen=True)
class AttemptView:
    attempt: int
    owner: str
    event: str  # opened | started | aborted | sealed | producer re-run (attempt 0: not an attempt's)
    at: float
    note: str = ""


@dataclass(frozen=True)
class EpochDetail:
    pipeline: str
    row: EpochRow
    opened_at: float | None
    sealed_at: float | None
    seconds_to_seal: float | None
    partitions: tuple[PartitionDetail, ...]
    barriers: tuple[BarrierView, ...]
    attempts: tuple[AttemptView, ...]
    history_loaded: bool


def as_json(value: Any) -> Any:
    """A dataclass (or a list of them) as plain JSON-able data."""
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return asdict(value)



def manifest_summary(manifests: Iterable[Any]) -> dict[str, Any]:
    """Rows, bytes, files and Spark seconds added up over manifests (the keys our Spark jobs write,
    or a top-level ``rows``); keys no manifest has are left out (:func:`manifest_totals`)."""
    return dict(manifest_totals(manifests))
