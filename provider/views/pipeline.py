"""Reading one pipeline's view model from ZooKeeper (read-only, no Airflow import): the one reader
behind ``airflow-epochs status`` and the Epochs page.

It reads only through the ledger's public API (``EpochLedger`` read methods and its bound recipes:
``ledger.lease().holder()``, ``ledger.barrier(...).status()``/``outcome()``,
``ledger.backpressure().consumers()``) and fills :mod:`airflow_epochs.views.model`: no znode path or
payload is known here, so the ledger's layout can change under it.

Cost model (what keeps 10,000 epochs fast): the epochs of a pipeline fall into at most three ranges
that a handful of reads find, because seals are ordered:

- ``first .. frontier``: sealed (the frontier's definition);
- ``frontier + 1 .. newest``: the one epoch in flight (open, voting or with an aborted attempt);
- ``newest + 1 .. last``: rolled back (a rollback marks a suffix; reopening starts from its front).

Counts and state filters are computed from these ranges, never by reading every epoch; a grid page
reads only the epochs it shows (in parallel), and votes only of the epoch in flight. The recorded
history (for times, attempts and the timeline) is read only when an epoch's
detail or the timeline is asked for, incrementally, the first time in the background, on its own
session; never on the grid's or the overview's path.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_epochs.coordination import (
    BarrierNotDeclared,
    ConfigVersion,
    EpochInfo,
    EpochLedger,
    EpochNotOpen,
    PipelineNotFound,
    SealInfo,
    VersionView,
)
from airflow_epochs.coordination.base.names import MAX_EPOCH
from airflow_epochs.coordination.wire.payloads import loads_bounded
from airflow_epochs.views.deadlines import partition_deadline
from airflow_epochs.views.history import HistoryCache
from airflow_epochs.views.model import (
    STATES,
    BarrierView,
    Cell,
    Counts,
    EpochDetail,
    EpochRow,
    GridPage,
    Overview,
    PartitionDetail,
    VoteView,
    manifest_summary,
)
from airflow_epochs.views.timeline import Span, spans

MAX_PAGE = 200
MANIFEST_PREVIEW_CHARS = 1500
MAX_OLDER_ATTEMPTS = 16  # superseded attempts one epoch's detail looks through for a producer's last vote
# Seconds a timeline request waits for the first read of a pipeline's history (a long history keeps
# loading in the background, and the page asks again soon).
TIMELINE_WAIT = 3.0

# pipeline name -> its ledger: how a caller hands the view model its ledgers (the page one built from
# ZooKeeperHook.ledger, the command line one on its own client), so the view model loads no Airflow and
# decides nothing about sessions, owners or roots.
LedgerFactory = Callable[[str], EpochLedger]


# -- reading one pipeline ----------------------------------------------------------------------


def _producers(config: ConfigVersion, partition: str) -> tuple[str, ...]:
    return tuple(config.config.partitions.get(partition, ()))



def _preview(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MANIFEST_PREVIEW_CHARS else text[:MANIFEST_PREVIEW_CHARS] + " ..."


class PipelineState:
    """Read-only view of one pipeline, through its ledger.

    :param ledger: the pipeline's ledger (a reader: it never opens or votes).
    :param pool: threads for reading the epochs of a page in parallel (None: one after the other).
    :param history_ledger: the ledger the history is read through (default ``ledger``): on another
        session, since ZooKeeper answers one session's requests in order, so a long history read on
        the page's own session would hold every grid read behind it.
    """

    def __init__(self, ledger: EpochLedger, *, pool: ThreadPoolExecutor | None = None,
                 history_ledger: EpochLedger | None = None) -> None:
        self.pipeline = ledger.pipeline
        self.ledger = ledger
        self.history = HistoryCache(history_ledger or ledger)
        self._pool = pool

    def exists(self) -> bool:
        """Whether the pipeline has been created in ZooKeeper (its first epoch opened)."""
        try:
            self.ledger.frontier()
        except PipelineNotFound:
            return False
        return True

    # -- ranges and counts -----------------------------------------------------------------

    def _versions(self) -> dict[int, ConfigVersion]:
        return {cv.version: cv for cv in self.ledger.config_versions()}

    def _exists(self, epoch: int) -> bool:
        return epoch <= MAX_EPOCH and self.ledger.epoch_info(epoch) is not None

    def _last_epoch(self, newest: int) -> int:
        """The newest epoch that exists, rolled-back ones included: they follow ``newest`` without a
        gap, so an exponential then binary search finds the end in O(log n) reads (usually one; at most
        about 70 whatever the records say, since epochs stop at MAX_EPOCH)."""
        if not self._exists(newest + 1):
            return newest
        low, step = newest + 1, 1
        while self._exists(low + step):
            low, step = low + step, step * 2
        high = low + step  # low exists, high does not
        while high - low > 1:
            middle = (low + high) // 2
            if self._exists(middle):
                low = middle
            else:
                high = middle
        return low

    def _ranges(self) -> tuple[int, int, int, int, dict[int, ConfigVersion]]:
        versions = self._versions()
        first = min((cv.from_epoch for cv in versions.values()), default=1)
        frontier = self.ledger.frontier()
        newest = self.ledger.newest_epoch()
        return first, frontier, newest, self._last_epoch(max(newest, frontier)), versions

    # -- rows ------------------------------------------------------------------------------

    def _row(self, info: EpochInfo, versions: Mapping[int, ConfigVersion], *, votes: bool) -> EpochRow:
        config = self._config_of(info, versions)
        cells = []
        aborted = info.state == "open" and info.attempt_state == "aborted"
        # a compacted epoch without an archive keeps no partition list; sealed, it sealed every one
        partitions = info.partitions or (tuple(config.config.partitions) if info.state == "sealed" else ())
        for partition in partitions:
            producers = _producers(config, partition)
            if info.state == "rolled_back":
                cells.append(Cell(partition, "rolled_back", 0, len(producers)))
            elif info.state == "sealed" or partition in info.sealed_partitions:
                cells.append(Cell(partition, "sealed", len(producers), len(producers)))
            else:
                cast = self._current_votes(info, partition, producers) if votes else 0
                state = "aborted" if aborted else ("voting" if cast else "open")
                cells.append(Cell(partition, state, cast, len(producers)))
        return EpochRow(info.epoch, _row_state(info, cells), info.attempt, info.attempt_state, info.owner,
                        info.config_version, info.generation, tuple(cells))

    def _config_of(self, info: EpochInfo, versions: Mapping[int, ConfigVersion]) -> ConfigVersion:
        found = versions.get(info.config_version)
        # None: a configuration newer than the cached list, or a compacted epoch's (it keeps no version)
        return found if found is not None else self.ledger.config_for(info.epoch)

    def _current_votes(self, info: EpochInfo, partition: str, producers: Sequence[str]) -> int:
        return sum(1 for producer in producers
                   if (vote := self.ledger.vote_of(info.epoch, partition, producer)) is not None
                   and vote.attempt == info.attempt)

    def _rows(self, epochs: Sequence[int], versions: Mapping[int, ConfigVersion], frontier: int) -> list[EpochRow]:
        def one(epoch: int) -> EpochRow | None:
            info = self.ledger.epoch_info(epoch)
            return None if info is None else self._row(info, versions, votes=epoch > frontier)

        found = self._pool.map(one, epochs) if self._pool is not None else map(one, epochs)
        return [row for row in found if row is not None]

    # -- what the endpoints serve ----------------------------------------------------------

    def overview(self) -> Overview:
        started = time.perf_counter()
        first, frontier, newest, last, versions = self._ranges()
        in_flight = None
        if newest > frontier:
            info = self.ledger.epoch_info(newest)
            if info is not None:
                in_flight = self._row(info, versions, votes=True)
        counts = _counts(first, frontier, newest, last, in_flight)
        holder = self.ledger.lease().holder()
        last_seal = None
        if frontier >= first:
            sealed = self.ledger.epoch_info(frontier)  # the record says when it was sealed
            last_seal = sealed.sealed_at if sealed is not None else None
        current = max(newest, frontier, first)
        try:
            partitions = tuple(sorted(self.ledger.config_for(current).config.partitions))
        except Exception:  # noqa: BLE001 - no configuration at that epoch: show none
            partitions = ()
        barriers = tuple(self.barriers(in_flight.epoch)) if in_flight else ()
        return Overview(
            pipeline=self.pipeline, first_epoch=first, frontier=frontier, newest_epoch=newest, last_epoch=last,
            partitions=partitions,
            leader=holder.owner if holder else None,
            leader_until=holder.until.isoformat() if holder else None,
            leader_expired=bool(holder and holder.remaining() <= 0),
            leader_since=holder.since.timestamp() if holder else None,
            in_flight=in_flight, lag_epochs=max(0, newest - frontier), last_seal_at=last_seal, counts=counts,
            barriers=barriers, consumers={c.consumer: c.acked for c in self.ledger.backpressure().consumers()},
            read_ms=round((time.perf_counter() - started) * 1000, 2),
        )

    def grid(self, *, offset: int = 0, limit: int = 50, states: Sequence[str] = (),
             before: int | None = None) -> GridPage:
        """A page of epochs, newest first.

        :param offset: epochs to skip (after the filter).
        :param limit: epochs on the page (at most :data:`MAX_PAGE`).
        :param states: show only epochs in these states (all when empty).
        :param before: show only epochs up to this one (jump to an epoch).
        """
        started = time.perf_counter()
        unknown = sorted(set(states) - set(STATES))
        if unknown:
            raise ValueError(f"unknown epoch state(s) {unknown}; known: {list(STATES)}")
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}, not {limit}")
        if offset < 0:
            raise ValueError(f"offset must not be negative, not {offset}")
        first, frontier, newest, last, versions = self._ranges()
        wanted = set(states or STATES)
        ranges: list[tuple[int, int]] = []  # inclusive, newest first
        if "rolled_back" in wanted and last > newest:
            ranges.append((max(newest, frontier) + 1, last))
        if newest > frontier:
            in_flight = self.ledger.epoch_info(newest)
            if in_flight is not None and self._row(in_flight, versions, votes=True).state in wanted:
                ranges.append((frontier + 1, newest))
        if "sealed" in wanted and frontier >= first:
            ranges.append((first, frontier))
        top = before if before is not None else last
        epochs: list[int] = []
        matching = 0
        skip = offset
        for low, high in ranges:
            high = min(high, top)
            if high < low:
                continue
            size = high - low + 1
            matching += size
            if skip >= size:
                skip -= size
                continue
            start = high - skip
            skip = 0
            take = min(limit - len(epochs), start - low + 1)
            epochs.extend(range(start, start - take, -1))
        rows = self._rows(epochs, versions, frontier)
        columns = sorted({cell.partition for row in rows for cell in row.cells})
        return GridPage(self.pipeline, offset, limit, matching, tuple(sorted(wanted)), tuple(columns), tuple(rows),
                        round((time.perf_counter() - started) * 1000, 2))

    def barriers(self, epoch: int) -> list[BarrierView]:
        """The barriers of ``epoch``'s configuration (and their arrivals, stragglers, decision)."""
        info = self.ledger.epoch_info(epoch)
        if info is None or info.state == "rolled_back":
            return []
        config = self.ledger.config_for(epoch).config
        views = []
        for name in sorted(config.barriers):
            barrier = self.ledger.barrier(epoch, name)
            try:
                status = barrier.status()
            except (BarrierNotDeclared, EpochNotOpen):
                expected = tuple(config.barriers[name])
                views.append(BarrierView(epoch, name, False, None, None, expected, (), expected, None))
                continue
            outcome = barrier.outcome()
            late = tuple(outcome.late) if outcome else status.late
            views.append(BarrierView(epoch, name, True, status.policy, status.deadline, status.registered,
                                     status.arrived, late,
                                     outcome.decision if outcome else None,
                                     outcome.stragglers if outcome else len(late)))
        return views

    def epoch_detail(self, epoch: int, *, history: bool = True) -> EpochDetail | None:
        """Votes, seals, manifests, snapshots, lineage, times and attempts of one epoch.

        :param history: read the recorded history for the attempts (False: a one-shot reader such as
            ``airflow-epochs status`` shows no attempts and starts no background read).
        """
        info = self.ledger.epoch_info(epoch)
        if info is None:
            return None
        if history:
            self.history.refresh(wait=True)  # in the background the first time: the detail never waits for it
        versions = self._versions()
        row = self._row(info, versions, votes=info.state == "open")
        config = self._config_of(info, versions)
        times = self.history.times(epoch) if history else None
        opened_at = info.opened_at or None
        parts = []
        for cell in row.cells:
            producers = _producers(config, cell.partition)
            seal: SealInfo | None = None
            view: VersionView | None = None
            if cell.state == "sealed":
                seal = self.ledger.seal(epoch, cell.partition)
                view = self.ledger.corrections.sealed_version(epoch, cell.partition) if seal is not None else None
            votes = []
            for producer in producers:
                if seal is not None:
                    shown = view or seal  # the newest sealed version's manifests
                    manifest = shown.manifests.get(producer)
                    votes.append(VoteView(producer, True, seal.attempt, True, manifest_summary([manifest]),
                                          _preview(manifest), shown.snapshots.get(producer)))
                    continue
                vote = self.ledger.vote_of(epoch, cell.partition, producer) if info.state == "open" else None
                # Superseded attempts, newest first, at most MAX_OLDER_ATTEMPTS of them: the attempt
                # number comes from a record, and a forged one (10**9) must not drive the loop.
                older_attempts = range(info.attempt - 1, max(0, info.attempt - 1 - MAX_OLDER_ATTEMPTS), -1)
                for older in older_attempts if vote is None and info.state == "open" else ():
                    vote = self.ledger.vote_of(epoch, cell.partition, producer, attempt=older)  # superseded
                    if vote is not None:
                        break
                if vote is None:
                    votes.append(VoteView(producer, False, None, False, {}, "", None))
                else:
                    votes.append(VoteView(producer, True, vote.attempt, vote.attempt == info.attempt,
                                          manifest_summary([vote.manifest]), _preview(vote.manifest), vote.snapshot))
            sealed_at = seal.sealed_at if seal else None
            parts.append(PartitionDetail(
                partition=cell.partition, state=cell.state, votes=cell.votes, needed=cell.needed,
                producers=tuple(votes), sealed_by=seal.attempt if seal else None, sealed_at=sealed_at,
                seconds_to_seal=round(sealed_at - opened_at, 3) if sealed_at and opened_at else None,
                summary=manifest_summary((view or seal).manifests.values()) if seal else
                manifest_summary(_parse(v.manifest) for v in votes if v.current),
                snapshots=dict((view or seal).snapshots) if seal else {},
                lineage=dict((view or seal).upstream) if seal else {},
                deadline=partition_deadline(self.ledger, epoch, cell.partition),
                **_version_fields(view),
            ))
        sealed_at = info.sealed_at
        if sealed_at is None and info.state == "sealed":
            sealed_at = max((p.sealed_at for p in parts if p.sealed_at), default=None)
        return EpochDetail(
            pipeline=self.pipeline, row=row, opened_at=opened_at, sealed_at=sealed_at,
            seconds_to_seal=round(sealed_at - opened_at, 3) if sealed_at and opened_at else None,
            partitions=tuple(parts), barriers=tuple(self.barriers(epoch)),
            attempts=tuple(times.attempts) if times else (), history_loaded=history and self.history.loaded,
        )

    def timeline(self, epochs: int = 14, *, wait: float = TIMELINE_WAIT) -> list[Span] | None:
        """The stage spans (as the demo's timeline draws them) of the newest ``epochs`` epochs, or None
        while the recorded history is still loading (after ``wait`` seconds): an empty list means
        nothing is recorded, never "not read yet"."""
        if not self.history.wait_loaded(wait):
            return None
        self.history.refresh(wait=True)
        newest = max(self.ledger.newest_epoch(), self.ledger.frontier())
        wanted = list(range(max(1, newest - epochs + 1), newest + 1))
        return spans(self.history.events(wanted), wanted)


def _version_fields(view: VersionView | None) -> dict[str, Any]:
    """A sealed partition's version as :class:`PartitionDetail` names it (see there)."""
    if view is None:
        return {}
    return {"version": view.version, "correction": view.correction, "stale_by": view.stale_by,
            "resealed_at": view.sealed_at if view.version > 1 else None}


def _parse(text: str) -> Any:
    with contextlib.suppress(ValueError):
        return loads_bounded(text)
    return None


def _row_state(info: EpochInfo, cells: Sequence[Cell]) -> str:
    if info.state in ("sealed", "rolled_back"):
        return info.state
    if info.attempt_state == "aborted":
        return "aborted"
    return "voting" if any(c.state in ("voting", "sealed") for c in cells) else "open"


def _counts(first: int, frontier: int, newest: int, last: int, in_flight: EpochRow | None) -> Counts:
    sealed = max(0, frontier - first + 1)
    rolled_back = max(0, last - max(newest, frontier))
    flight = {"voting": 0, "open": 0, "aborted": 0}
    if in_flight is not None:
        flight[in_flight.state] = 1
    return Counts(total=sealed + rolled_back + sum(flight.values()), sealed=sealed, rolled_back=rolled_back,
                  **flight)


class StateReader:
    """The pipelines' states for one process, each read through the ledgers its caller's factories make
    (each called once a pipeline, on first use).

    :param ledgers: a pipeline's ledger (a reader: the view model opens and votes nothing).
    :param threads: reader threads for a page's epochs.
    :param history_ledgers: a pipeline's ledger for bulk history reads, best on a session of its own
        (default: ``ledgers``).
    """

    def __init__(self, ledgers: LedgerFactory, *, threads: int = 8,
                 history_ledgers: LedgerFactory | None = None) -> None:
        self._ledgers = ledgers
        self._history_ledgers = history_ledgers or ledgers
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="epochs-ui-read")
        self._pipelines: dict[str, PipelineState] = {}
        self._lock = threading.Lock()

    def pipeline(self, name: str) -> PipelineState:
        with self._lock:
            state = self._pipelines.get(name)
            if state is None:
                state = PipelineState(self._ledgers(name), pool=self._pool,
                                      history_ledger=self._history_ledgers(name))
                self._pipelines[name] = state
            return state

    def close(self) -> None:
        self._pool.shutdown(wait=False)
