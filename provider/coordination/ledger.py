"""The epoch ledger: one pipeline's protocol over a started kazoo client, in one object.

:class:`EpochLedger` is a facade: the protocol lives in the modules it calls (:mod:`.config_store`,
:mod:`.opening`, :mod:`.aborts`, :mod:`.rollbacks`; :mod:`.votes` and :mod:`.seals` for votes and
seals; :mod:`.reader` for reads; :mod:`.retention` for compaction; :mod:`.lineage`). Every mutating
call takes an optional ``request_id``, except :meth:`EpochLedger.compact` (idempotent: a repeat
finishes what a cut-short one left, so it needs none); after a lost answer, and before any refusal,
the call asks ZooKeeper whether that request committed and answers with what it did (see the outcome
table, docs: reference/outcomes), and repeating a call with the same ``request_id`` never applies it twice.

It is also the bound handle of the pipeline's recipe families, the way kazoo binds ``zk.Lock``: one
binding line a family, each built as ``Family(self.ctx, what it names, *, options)`` on the ledger's
context (client, pipeline, owner, root, deadline, clock): :meth:`~EpochLedger.barrier`,
:meth:`~EpochLedger.lease`, :meth:`~EpochLedger.lock`, :meth:`~EpochLedger.consumer`,
:meth:`~EpochLedger.backpressure`, :meth:`~EpochLedger.deadlines` and :attr:`~EpochLedger.corrections`.
Airflow code gets the ledger from ``ZooKeeperHook.ledger()``.
"""

from __future__ import annotations

import datetime
import functools
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from airflow_epochs.coordination.base.errors import EpochsError, InvalidEpoch
from airflow_epochs.coordination.base.names import validate_name, validate_root
from airflow_epochs.coordination.base.paths import DEFAULT_ROOT, PipelinePaths
from airflow_epochs.coordination.protocol import (
    aborts,
    closing,
    config_store,
    opening,
    pipelined_votes,
    retention,
    rollbacks,
    votes,
)
from airflow_epochs.coordination.protocol.aborts import AbortResult
from airflow_epochs.coordination.protocol.pipelined_votes import Ballot
from airflow_epochs.coordination.protocol.retention import CompactionReport
from airflow_epochs.coordination.recipes import waits
from airflow_epochs.coordination.recipes.backpressure.consumers import Backpressure, Consumer
from airflow_epochs.coordination.recipes.barriers.barrier import Barrier
from airflow_epochs.coordination.recipes.corrections.corrections import Corrections
from airflow_epochs.coordination.recipes.corrections.records import (
    CorrectionNode,
    Reseal,
    VersionEntry,
    VersionVoteResult,
)
from airflow_epochs.coordination.recipes.corrections.versions import VersionView
from airflow_epochs.coordination.recipes.deadlines import deadlines
from airflow_epochs.coordination.recipes.deadlines.deadlines import PartitionDeadlines
from airflow_epochs.coordination.recipes.delivery import scopes as delivery_scopes
from airflow_epochs.coordination.recipes.delivery.records import RetiredScope
from airflow_epochs.coordination.recipes.delivery.rewinds import rewind_on_rollback
from airflow_epochs.coordination.recipes.leadership.lease import LeaderLease
from airflow_epochs.coordination.recipes.lineage import LineageItem, read_lineage
from airflow_epochs.coordination.recipes.locks import LockMode, resource_lock
from airflow_epochs.coordination.state import snapshots
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.pipeline_reader import PipelineReader
from airflow_epochs.coordination.wire.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.wire.records import (
    Attempt,
    EpochInfo,
    Event,
    SealInfo,
    SealRecord,
    SnapshotRef,
    VoteRecord,
    VoteResult,
)

__all__ = ["AbortResult", "Attempt", "EpochInfo", "EpochLedger", "Event", "SealInfo", "SnapshotRef", "VoteRecord",
           "VoteResult", "connected_ledger"]

# What each recipe family trims when epochs are compacted (handed to retention, which knows no family).
COMPACTION_STEPS: tuple[retention.CompactionStep, ...] = (deadlines.COMPACTION, delivery_scopes.COMPACTION)
# What each recipe family adds to a rollback's transaction (the kernel knows none of them).
ROLLBACK_STEPS: tuple[rollbacks.RollbackStep, ...] = (rewind_on_rollback,)


class EpochLedger:
    """The epoch protocol of one pipeline over a started kazoo client.

    :param client: a started :class:`~kazoo.client.KazooClient` (possibly chrooted).
    :param pipeline: the pipeline name; its subtree is ``<root>/<pipeline>``.
    :param owner: identity recorded on the attempts this ledger opens (deployment, host, run).
    :param root: the znode under which pipelines live.
    :param op_timeout: the deadline of one call in seconds, reconnects and retries included (default 15).
    :param clock: wall clock for recorded timestamps (never used for ordering).
    """

    def __init__(
        self,
        client: KazooClient,
        pipeline: str,
        *,
        owner: str = "anonymous",
        root: str = DEFAULT_ROOT,
        op_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ctx = PipelineContext(client, PipelinePaths(pipeline, root), owner=owner, op_timeout=op_timeout,
                                   clock=clock)
        self.reader = PipelineReader(self.ctx)
        self.paths = self.ctx.paths
        self.pipeline = pipeline
        self.owner = self.ctx.owner
        self.session = self.ctx.session
        self.client = client
        self.op_timeout = op_timeout

    # -- pipeline and configuration ----------------------------------------------------------

    def create_pipeline(
        self, config: PipelineConfig, *, first_epoch: int = 1, exist_ok: bool = True, request_id: str | None = None
    ) -> ConfigVersion:
        """Create the pipeline's subtree with its first configuration version.

        :param config: partitions and producers from ``first_epoch`` on.
        :param first_epoch: the first epoch number; the frontier starts just below it.
        :param exist_ok: if the pipeline exists, return its configuration for ``first_epoch``
            instead of raising :class:`PipelineExists`. An existing pipeline is never changed here;
            use :meth:`set_config`.
        """
        return config_store.create_pipeline(self.ctx, config, first_epoch=first_epoch, exist_ok=exist_ok,
                                            request_id=request_id)

    def set_config(self, config: PipelineConfig, *, from_epoch: int, request_id: str | None = None) -> ConfigVersion:
        """Schedule a configuration change that applies from ``from_epoch`` on.

        ``from_epoch`` must be later than every epoch opened so far, so no epoch ever changes
        configuration while it runs.
        """
        return self.set_configs([(config, from_epoch)], request_id=request_id)[0]

    def set_configs(
        self, changes: Sequence[tuple[PipelineConfig, int]], *, request_id: str | None = None
    ) -> list[ConfigVersion]:
        """Schedule several configuration versions in one transaction (all or none), e.g. the steps of
        a fluid bucket migration. Each ``(config, from_epoch)`` follows the rule of :meth:`set_config`."""
        return config_store.set_configs(self.ctx, changes, request_id=request_id)

    def config_versions(self) -> list[ConfigVersion]:
        """Every configuration version, oldest first."""
        return self.reader.config_versions()

    def config_for(self, epoch: int) -> ConfigVersion:
        """The configuration version in force at ``epoch``: the newest one starting at or before it."""
        return self.reader.config_for(epoch)

    # -- epochs and attempts -----------------------------------------------------------------

    def open_epoch(
        self, epoch: int, *, takeover: bool = False, wait: float | None = None, request_id: str | None = None
    ) -> Attempt:
        """Open ``epoch`` and return the attempt to work under.

        - a new epoch opens only if ``epoch - 1`` is sealed (or it is the first epoch);
        - repeating the request (same ``request_id``) returns the attempt it opened;
        - an epoch with a running attempt of another owner raises :class:`EpochAlreadyOpen`, unless
          ``takeover`` is set: then a new attempt supersedes it (the old token is fenced off);
        - a running attempt of this same owner opened by another request is superseded too: a
          replacement process never shares a possible zombie's fencing token;
        - an epoch whose attempt was aborted gets a new attempt;
        - a rolled-back epoch is reopened as a new generation under the configuration in force;
        - with a backpressure window in the configuration, a new epoch e opens only while
          e <= slowest consumer's acknowledged epoch + window: otherwise :class:`Backpressured` is
          raised at once, or after waiting up to ``wait`` seconds for the consumers to catch up.
        """
        return waits.open_epoch_waiting(self.ctx, epoch, takeover=takeover, wait=wait, request_id=request_id)

    def current_attempt(self, epoch: int) -> Attempt:
        """The epoch's current attempt (to resume it from another process); raises if not open."""
        return opening.current_attempt(self.ctx, epoch)

    def abort_attempt(self, attempt: Attempt, *, reason: str = "", request_id: str | None = None) -> AbortResult:
        """Abort the current attempt: its token can no longer vote; the epoch stays open for a new one.

        A repeat of a committed abort returns its result, with ``overtaken`` set if the attempt was
        rolled back since; an abort never lands after the attempt sealed the epoch."""
        self.check_handle(attempt)
        return aborts.abort_attempt(self.ctx, attempt, reason=reason, request_id=request_id)

    # -- votes and seals ---------------------------------------------------------------------

    def vote(
        self,
        attempt: Attempt,
        partition: str,
        producer: str,
        manifest: Mapping[str, Any] | None = None,
        *,
        snapshot: Any = None,
        upstream: Mapping[str, int] | None = None,
        read_versions: Mapping[str, int] | None = None,
        request_id: str | None = None,
    ) -> VoteResult:
        """Record that ``producer`` finished its part of ``partition`` under ``attempt``.

        One transaction that reads nothing; the vote that completes the partition seals it (and,
        if it is the last partition, the epoch, moving the frontier). A repeated identical vote is a
        no-op (``duplicate=True``); a vote with another manifest, from a superseded attempt, or for
        an unknown partition or producer is refused and writes nothing.

        :param manifest: what the producer wrote: paths, row counts, checksums (small JSON).
        :param snapshot: optional pointer (at most 2 KB of JSON) to the state this epoch leaves for
            the next one.
        :param upstream: the upstream frontiers this output was built from (causal lineage), e.g.
            ``{"flights_raw": 17, "weather_raw": 42}``.
        :param read_versions: for the partitions of this pipeline ``upstream`` names (``read_key``), the
            version read of each (``VersionView.version``, ``SnapshotRef.version``; 1: the original seal). A
            correction then re-produces this seal only if a version it read is older than the corrected
            one; a key left out is judged by when the attempt started (it may have read the old one).
        """
        self.check_handle(attempt)
        return votes.vote(self.ctx, attempt, partition, producer, manifest, snapshot=snapshot, upstream=upstream,
                          read_versions=read_versions, request_id=request_id)

    def vote_many(self, attempt: Attempt, ballots: Sequence[Ballot]) -> list[VoteResult | EpochsError]:
        """Cast many votes under ``attempt`` pipelined: every vote's transaction is sent before the
        first answer is awaited. Each vote is answered as :meth:`vote` answers it (its own request id,
        the same transaction and fencing); the list holds, in the order of ``ballots``, each vote's
        :class:`VoteResult` or the error :meth:`vote` would have raised for it. Every ballot is
        checked before anything is sent.

        :param ballots: :class:`Ballot` records (partition, producer, manifest, snapshot, upstream,
            request id), at most 512, one per producer and partition.
        """
        self.check_handle(attempt)
        return pipelined_votes.vote_many(self.ctx, attempt, ballots)

    def close_epoch(self, attempt: Attempt, *, request_id: str | None = None) -> EpochInfo:
        """Seal the epoch once every partition is sealed, advancing the frontier; idempotent.

        The last vote normally seals the epoch already; this call verifies it, finishes a seal
        whose voter died before writing it, and seals epochs whose configuration has no partitions.
        Raises :class:`EpochIncomplete` naming the partitions still missing votes.
        """
        self.check_handle(attempt)
        return closing.close_epoch(self.ctx, attempt, request_id)

    def rollback(self, to_epoch: int, *, reason: str, request_id: str | None = None) -> list[int]:
        """Roll back every epoch after ``to_epoch`` (sealed or open) and move the frontier to it.

        Rolled-back epochs keep their seals as the record of what was undone (an old generation);
        reopening one starts a new generation. Returns the rolled-back epoch numbers. Applied at most
        once per ``request_id``: a repeat returns the first call's result.

        :param to_epoch: the last epoch that stays sealed (``first_epoch - 1`` rolls back everything).
        :param reason: why, recorded in the history.
        """
        return rollbacks.rollback(self.ctx, to_epoch, reason=reason, request_id=request_id, steps=ROLLBACK_STEPS)

    def delivery_scopes(self) -> list[str]:
        """The pipeline's asset-delivery scopes (one a deployment whose triggerer delivers seals), sorted."""
        return delivery_scopes.delivery_scopes(self.ctx)

    def retire_delivery_scope(self, scope: str, *, request_id: str | None = None) -> RetiredScope:
        """Remove a delivery scope nobody delivers any more, so that compaction proceeds past its cursors;
        refused while a deliverer holds it (see :mod:`.delivery_scopes`)."""
        return delivery_scopes.retire_delivery_scope(self.ctx, scope, request_id=request_id)

    def delete_pipeline(self, *, confirm: str) -> int:
        """Delete the pipeline's whole ZooKeeper subtree (``confirm`` = its name); returns the znodes deleted."""
        return config_store.delete_pipeline(self.ctx, confirm=confirm)

    def compact(self, *, max_epochs: int | None = None) -> CompactionReport:
        """Apply the configuration's ``retain_epochs``: compact sealed epochs that fell out of it.

        :param max_epochs: compact at most this many epochs in this call (None: all that are due).
        """
        return retention.compact(self.ctx, steps=COMPACTION_STEPS, max_epochs=max_epochs)

    # -- reading -----------------------------------------------------------------------------

    def frontier(self) -> int:
        """The highest epoch such that it and every earlier epoch are sealed."""
        return self.reader.frontier()

    def watch_frontier(self, callback: Callable[[int], Any]) -> DataWatch:
        """Call ``callback(frontier)`` now and after every change (kazoo DataWatch; survives reconnects).

        The callback runs on kazoo's event thread; return ``False`` from it to stop watching.
        """
        return waits.watch_frontier(self.client, self.paths.frontier, callback)

    def wait_for_frontier(self, epoch: int, *, timeout: float | None = None) -> int:
        """Block until the frontier reaches ``epoch`` (on a watch: woken by the change itself), or
        ``timeout`` seconds pass (None: no limit); returns the frontier then."""
        return waits.wait_for_frontier(self.client, self.paths.frontier, epoch, timeout=timeout,
                                       frontier=self.frontier)

    def epoch_info(self, epoch: int) -> EpochInfo | None:
        """The recorded state of ``epoch``, or None if it was never opened."""
        return self.reader.epoch_info(epoch)

    def newest_epoch(self) -> int:
        """The newest epoch opened (and not rolled back); ``first_epoch - 1`` if none."""
        return self.reader.newest_epoch()

    def seal(self, epoch: int, partition: str) -> SealInfo | None:
        """The seal of ``partition`` at ``epoch`` (current generation) with its votes, or None."""
        return self.reader.seal(epoch, partition)

    def seal_record(self, epoch: int, partition: str) -> SealRecord | None:
        """The seal of ``partition`` at ``epoch`` without the votes (one read after the epoch's)."""
        return self.reader.seal_record(epoch, partition)

    def vote_of(self, epoch: int, partition: str, producer: str, *, attempt: int | None = None) -> VoteRecord | None:
        """The vote ``producer`` cast on ``partition`` under the epoch's current attempt (or under
        ``attempt``: a superseded attempt's votes stay, never counted), or None."""
        return self.reader.vote_of(epoch, partition, producer, attempt)

    def last_sealed_snapshot(
        self, partition: str, *, before_epoch: int | None = None, producer: str | None = None
    ) -> SnapshotRef | None:
        """The newest snapshot pointer sealed for ``partition`` before ``before_epoch``.

        A retry of epoch e asks with ``before_epoch=e`` and gets what the newest earlier epoch that
        left one sealed; output of unsealed attempts is never returned. Constant cost: it reads a
        pointer written with the seal, never the epochs in between. A question older than the pointer's
        two snapshots walks back (the epochs kept, the compaction summary, at most 64 archived epochs);
        None only when no snapshot was sealed before ``before_epoch``, and
        :class:`SnapshotHistoryUnavailable` when the compacted history that would say is not readable.

        :param producer: which producer's snapshot, if several producers of the partition left one
            (:class:`UnknownProducer` otherwise; :meth:`last_sealed_snapshots` returns them all).
        """
        if producer is not None:
            validate_name("producer", producer)
        return snapshots.pick_snapshot(self.last_sealed_snapshots(partition, before_epoch=before_epoch), partition,
                                       producer)

    def last_sealed_snapshots(self, partition: str, *, before_epoch: int | None = None) -> dict[str, SnapshotRef]:
        """Every producer's newest sealed snapshot pointer for ``partition`` before ``before_epoch``."""
        return self.corrections.newest_snapshots(self.reader.last_sealed_snapshots(partition,
                                                                                   before_epoch=before_epoch))

    def history(self, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
        """The recorded state changes after ``since_seq`` (the ``seq`` of the last event seen), oldest
        first; only those are read. Compacted epochs' events are pruned."""
        return self.reader.history(since_seq=since_seq, limit=limit)

    def latest_event(self) -> Event | None:
        """The newest recorded state change, in one read."""
        return self.reader.latest_event()

    def lineage(self, epoch: int, partition: str) -> LineageItem | None:
        """The upstream frontiers the seal of ``partition`` at ``epoch`` was built from (None if it is
        not sealed, or compacted without a kept vector); see :mod:`.lineage`."""
        return read_lineage(self.ctx, epoch, partition)

    # -- recipes bound to this pipeline ------------------------------------------------------

    def barrier(self, epoch: int, name: str, *, generation: int | None = None) -> Barrier:
        """The barrier ``name`` of ``epoch`` (of the epoch's ``generation``, when given: a handle
        taken before a rollback then refuses the reopened epoch's barrier)."""
        return Barrier(self.ctx, epoch, name, generation=generation)

    def lease(self, *, owner: str | None = None,
              duration: datetime.timedelta = datetime.timedelta(seconds=60)) -> LeaderLease:
        """The pipeline's leadership lease, contended for as ``owner`` (default: the ledger's owner)."""
        return LeaderLease(self.ctx if owner is None else self.ctx.as_owner(owner), duration=duration)

    def lock(self, resource: str, *, mode: LockMode = "exclusive", timeout: float = 30.0,
             identifier: str = "") -> AbstractContextManager[None]:
        """A lock on ``resource`` of the pipeline, held for a ``with`` block (see :mod:`.locks`)."""
        return resource_lock(self.ctx, resource, mode=mode, timeout=timeout, identifier=identifier)

    def consumer(self, name: str) -> Consumer:
        """The consumer ``name`` of the pipeline: register, acknowledge, unregister (backpressure)."""
        return Consumer(self.ctx, name)

    def backpressure(self) -> Backpressure:
        """The pipeline's consumers as they hold its producers back."""
        return Backpressure(self.ctx)

    def deadlines(self, *, window: int = 32) -> PartitionDeadlines:
        """Partition deadlines and predicted seals: ``ledger.deadlines().predicted_seal(epoch, partition)``."""
        return PartitionDeadlines(self.ctx, window=window)

    @functools.cached_property
    def corrections(self) -> Corrections:
        """Re-seals and the corrections they start: ``ledger.corrections.reseal(epoch, partition, reason=...)``."""
        return Corrections(self.ctx)

    # -- deprecated: the re-seal calls moved to ``ledger.corrections`` -------------------------

    def reseal(self, epoch: int, partition: str, *, reason: str, request_id: str | None = None) -> Reseal:
        """Deprecated: use ``ledger.corrections.reseal``."""
        _moved("reseal", "reseal")
        return self.corrections.reseal(epoch, partition, reason=reason, request_id=request_id)

    def vote_version(self, epoch: int, partition: str, version: int, producer: str,
                     manifest: Mapping[str, Any] | None = None, *, snapshot: Any = None,
                     upstream: Mapping[str, int] | None = None, request_id: str | None = None,
                     read_versions: Mapping[str, int] | None = None) -> VersionVoteResult:
        """Deprecated: use ``ledger.corrections.vote_version``."""
        _moved("vote_version", "vote_version")
        return self.corrections.vote_version(epoch, partition, version, producer, manifest, snapshot=snapshot,
                                             upstream=upstream, read_versions=read_versions, request_id=request_id)

    def versions(self, epoch: int, partition: str) -> tuple[VersionEntry, ...]:
        """Deprecated: use ``ledger.corrections.versions``."""
        _moved("versions", "versions")
        return self.corrections.versions(epoch, partition)

    def sealed_version(self, epoch: int, partition: str, version: int | None = None) -> VersionView | None:
        """Deprecated: use ``ledger.corrections.sealed_version``."""
        _moved("sealed_version", "sealed_version")
        return self.corrections.sealed_version(epoch, partition, version)

    def advance_correction(self, correction: str, *, max_steps: int | None = None) -> CorrectionNode:
        """Deprecated: use ``ledger.corrections.advance``."""
        _moved("advance_correction", "advance")
        return self.corrections.advance(correction, max_steps=max_steps)

    def resume_corrections(self) -> list[CorrectionNode]:
        """Deprecated: use ``ledger.corrections.resume``."""
        _moved("resume_corrections", "resume")
        return self.corrections.resume()

    def pending_reseals(self) -> list[Reseal]:
        """Deprecated: use ``ledger.corrections.pending``."""
        _moved("pending_reseals", "pending")
        return self.corrections.pending()

    # -- handles -----------------------------------------------------------------------------

    def check_handle(self, attempt: Attempt) -> None:
        """Refuse an attempt handle of another pipeline, or one obtained under an expired session of
        this client (:class:`SessionLost`); nothing is written either way."""
        if not isinstance(attempt, Attempt):
            raise InvalidEpoch(f"expected an Attempt, got {type(attempt).__name__}")
        if attempt.pipeline != self.pipeline:
            raise InvalidEpoch(f"attempt belongs to pipeline {attempt.pipeline!r}, not {self.pipeline!r}")
        self.session.ensure_session_alive(attempt.session, f"attempt {attempt.token} of epoch {attempt.epoch}")


def _moved(old: str, new: str) -> None:
    warnings.warn(f"EpochLedger.{old}() is deprecated: use ledger.corrections.{new}()", DeprecationWarning,
                  stacklevel=3)


@contextmanager
def connected_ledger(
    start_client: Callable[[], KazooClient],
    pipeline: str,
    *,
    owner: str = "anonymous",
    root: str = DEFAULT_ROOT,
    op_timeout: float | None = None,
) -> Iterator[EpochLedger]:
    """The ledger of ``pipeline`` on a client of its own, for one-shot commands (the CLI, scripts):
    ``start_client()`` returns a started client (e.g. ``ZooKeeperSettings.start_client``); it is
    stopped and closed on leaving the block. Airflow code gets its ledger from
    ``ZooKeeperHook.ledger()`` instead, on the hook's client.

    :raises InvalidInput: a bad pipeline name, owner or root, before any connection is made.
    """
    validate_name("pipeline", pipeline)
    validate_name("owner", owner)
    root = validate_root(root)
    client = start_client()
    try:
        yield EpochLedger(client, pipeline, owner=owner, root=root, op_timeout=op_timeout)
    finally:
        client.stop()
        client.close()
