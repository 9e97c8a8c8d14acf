"""Corrections of one pipeline: re-seals (new versions of a sealed (epoch, partition)) and the
invalidation that re-produces exactly the seals that read an old version. Bound to a ledger as
``ledger.corrections`` (``ledger.corrections.reseal(...)``, ``ledger.corrections.vote_version(...)``);
the protocol is :mod:`.reseal` and ``invalidation.py``, the reads ``versions.py``."""

from __future__ import annotations

import builtins
import logging
import warnings
from collections.abc import Mapping
from typing import Any

from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.recipes.corrections import invalidation, reseal
from airflow_epochs.coordination.recipes.corrections.records import (
    MAX_VERSION_NUMBER,
    CorrectionNode,
    Reseal,
    VersionEntry,
    VersionVoteResult,
)
from airflow_epochs.coordination.recipes.corrections.versions import (
    VersionView,
    newest_snapshots,
    version_view,
    versions_node,
)
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.records import SnapshotRef

log = logging.getLogger(__name__)


class Corrections:
    """The re-seals and corrections of one pipeline.

    :param ctx: the pipeline's context.
    """

    def __init__(self, ctx: PipelineContext) -> None:
        self.ctx = ctx

    def reseal(self, epoch: int, partition: str, *, reason: str, request_id: str | None = None) -> Reseal:
        """Open the next version (2, 3, ...) of the sealed ``partition`` at ``epoch``: its producers
        re-produce it and vote under that version (:meth:`vote_version`); the seal and earlier versions
        stay as they were. Once it seals, every seal that read the old version is re-produced too
        (:meth:`pending`), and nothing else.

        :param reason: why (the late or corrected input), recorded in the history.
        :raises ResealNotSealed: the epoch is not sealed yet. :raises ResealUnknownPartition: not
            configured at that epoch. :raises ResealCompacted: the epoch is compacted.
        :raises ResealInFlight: another version of it is open, or sealed while its correction still
            re-produces what read it (one re-seal at a time).
        """
        return reseal.reseal(self.ctx, epoch, partition, reason=reason, request_id=request_id)

    def vote_version(
        self, epoch: int, partition: str, version: int, producer: str, manifest: Mapping[str, Any] | None = None,
        *, snapshot: Any = None, upstream: Mapping[str, int] | None = None, request_id: str | None = None,
        read_versions: Mapping[str, int] | None = None,
    ) -> VersionVoteResult:
        """Record ``producer``'s re-produced part of ``partition`` at ``epoch`` under ``version`` (as
        :meth:`EpochLedger.vote <airflow_epochs.coordination.ledger.EpochLedger.vote>`); the vote that
        completes the producers seals the version, and
        the correction it belongs to is then advanced (:meth:`advance`).

        :param upstream: the lineage vector: upstream pipelines and, named by
            :func:`~..wire.versions.read_key`, the partitions of this pipeline it read, to the epoch read.
        :param read_versions: the version read of each partition of this pipeline ``upstream`` names (as
            :meth:`EpochLedger.vote <airflow_epochs.coordination.ledger.EpochLedger.vote>`).
        """
        result = reseal.vote_version(self.ctx, epoch, partition, version, producer, manifest, snapshot=snapshot,
                                     upstream=upstream, read_versions=read_versions, request_id=request_id)
        if result.sealed:
            entry = self.version_entry(epoch, partition, version)
            if entry is not None:
                try:
                    invalidation.advance(self.ctx, entry.correction)
                except EpochsError as exc:  # the vote is in; the next advance or resume finishes the rest
                    log.warning("correction %s: not advanced after the vote: %s", entry.correction, exc)
        return result

    def version_entry(self, epoch: int, partition: str, version: int) -> VersionEntry | None:
        """Version ``version`` (>= 2) of (epoch, partition) as its versions node lists it, or None."""
        found = self.ctx.call(lambda call: versions_node(call, self.ctx, epoch, partition), what="read versions")
        return None if found is None else found.record.entry(version)

    def versions(self, epoch: int, partition: str) -> tuple[VersionEntry, ...]:
        """Every version after the first of (epoch, partition), open or sealed, oldest first."""
        validate_epoch(epoch)
        validate_name("partition", partition)
        found = self.ctx.call(lambda call: versions_node(call, self.ctx, epoch, partition), what="read versions")
        return () if found is None else found.record.entries

    def sealed_version(self, epoch: int, partition: str, version: int | None = None) -> VersionView | None:
        """The sealed ``version`` of (epoch, partition) (None: the newest), naming its number, and, when a
        newer one exists, the correction that made it stale and when that landed; None if not sealed."""
        validate_epoch(epoch)
        validate_name("partition", partition)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or not 1 <= version <= MAX_VERSION_NUMBER):
            raise InvalidInput(f"version must be an integer in 1..{MAX_VERSION_NUMBER} or None, not {version!r}")
        return self.ctx.call(lambda call: version_view(call, self.ctx, epoch, partition, version),
                             what=f"read {partition!r} at epoch {epoch} version {version or 'latest'}")

    def newest_snapshots(self, refs: dict[str, SnapshotRef]) -> dict[str, SnapshotRef]:
        """Snapshot references with the pointers the newest sealed versions left (see ``versions.py``)."""
        if not refs:
            return refs
        return self.ctx.call(lambda call: newest_snapshots(call, self.ctx, refs), what="read re-sealed snapshots")

    def list(self) -> builtins.list[CorrectionNode]:
        """Every correction: its origin, its plan (the stale seals, in re-production order) and its state."""
        return invalidation.corrections(self.ctx)

    def advance(self, correction: str, *, max_steps: int | None = None) -> CorrectionNode:
        """Drive correction ``correction`` as far as it goes now (idempotent; see ``invalidation.py``)."""
        return invalidation.advance(self.ctx, correction, max_steps=max_steps)

    def resume(self) -> builtins.list[CorrectionNode]:
        """Advance every unfinished correction (after a crash mid-invalidation)."""
        return invalidation.resume(self.ctx)

    def pending(self) -> builtins.list[Reseal]:
        """The re-seals that wait for their producers now, one per unfinished correction, in epoch order."""
        return invalidation.pending(self.ctx)

    def __call__(self) -> builtins.list[CorrectionNode]:
        """Deprecated: ``ledger.corrections()`` was a method; use ``ledger.corrections.list()``."""
        warnings.warn("ledger.corrections() is deprecated: use ledger.corrections.list()", DeprecationWarning,
                      stacklevel=2)
        return self.list()
