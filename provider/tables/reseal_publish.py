"""Publishing re-seals: a published epoch whose partition was re-sealed as version N gets its files
replaced in the table, in ONE snapshot per re-seal (an Iceberg overwrite: the epoch's live files deleted
and version N's appended in one commit), whose summary names the epoch, the version, the correction, the
re-seal's request id and its reason (``epochs.action=reseal``).

It runs inside a publish (:meth:`~airflow_epochs.tables.publish.Publisher.publish`), under the table's
publish lock, after a rollback is mirrored: every live epoch whose newest sealed version is newer than the
one in the table is re-published, oldest epoch first. Exactly once as a publish is: a repeat finds the
re-seal snapshot by its properties (``history.find_reseal``) and adds nothing;
our tables have pyiceberg's own commit retry off, so a commit the catalog refuses reaches us, and we look
for the winner's snapshot before trying again. The snapshots before it keep the older version:
:func:`~airflow_epochs.tables.read.table_as_of_epoch` reads any (epoch, version).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.spark.storage import mark_published
from airflow_epochs.tables import history as h
from airflow_epochs.tables.columns import arrow_for_iceberg, check_compatible, files_schema, registrable
from airflow_epochs.tables.commit_guard import commit_failed
from airflow_epochs.tables.seal_files import PublishRefused, seal_to_publish

log = logging.getLogger(__name__)

COMMIT_RETRIES = 5


def resealed_epochs(ledger: EpochLedger, table: Any, partition: str) -> list[tuple[int, int, h.PublishedSnapshot]]:
    """(epoch, newest sealed version, the live record) of every live epoch of the table that was re-sealed
    (its version there older: to publish; the same: published already).

    Only the epochs a correction names (its origin or its plan) are asked about, not every live epoch:
    a publish reads one node per correction, plus one per re-sealed epoch of this partition."""
    touched: set[int] = set()
    for correction in ledger.corrections.list():
        keys = [(correction.origin[0], correction.origin[1]), *correction.plan]
        touched.update(epoch for epoch, key in keys if key == partition)
    found = []
    for epoch, record in h.live_epochs(table).items():
        if epoch not in touched:
            continue
        view = ledger.corrections.sealed_version(epoch, partition)
        if view is not None and view.version > 1:
            found.append((epoch, view.version, record))
    return found


def epoch_files(table: Any, snapshot_ids: set[int]) -> list[Any]:
    """The data files of the current snapshot that ``snapshot_ids`` added (an epoch's live files)."""
    snapshot = table.current_snapshot()
    found = []
    for manifest in [] if snapshot is None else snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.snapshot_id in snapshot_ids:
                found.append(entry.data_file)
    return found


def _no_step(_step: str) -> None:
    """The default ``on_step``: nobody watches the steps."""


@dataclass(eq=False)
class ResealPublisher:
    """Re-publishes re-sealed epochs of ``partition`` into the table ``identifier``; call under its
    publish lock (see the module).

    :param ledger: the pipeline's ledger.
    :param load: returns the table now (None: there is none).
    :param identifier: the table's name (for messages and run markers).
    :param partition: the partition the table holds.
    :param output: which output of the manifests.
    :param storage: the storage root the run folders must be in (when given).
    :param on_step: called with ``planned`` and ``committed`` (crash tests).
    """

    ledger: EpochLedger
    load: Callable[[], Any]
    _: KW_ONLY
    identifier: str
    partition: str
    output: str = "data"
    storage: str | None = None
    on_step: Callable[[str], None] = _no_step

    def publish_pending(self, through_epoch: int | None = None) -> tuple[list[h.PublishedSnapshot],
                                                                         list[h.PublishedSnapshot]]:
        """Re-publish every re-sealed live epoch (through ``through_epoch``), oldest first: the snapshots
        made now, and those found made already (by an earlier call or a racing publisher)."""
        made: list[h.PublishedSnapshot] = []
        found: list[h.PublishedSnapshot] = []
        table = self.load()
        if table is None:
            return made, found
        for epoch, version, live in resealed_epochs(self.ledger, table, self.partition):
            if through_epoch is not None and epoch > through_epoch:
                continue
            if live.version >= version:
                if live.action == h.RESEAL:  # this re-seal's snapshot is in: a repeat answers with it
                    found.append(live)
                continue
            record, new = self.publish_version(epoch, version)
            (made if new else found).append(record)
        return made, found

    def publish_version(self, epoch: int, version: int) -> tuple[h.PublishedSnapshot, bool]:
        """Replace ``epoch``'s files with those of its sealed ``version``, once; returns the re-seal
        snapshot and whether this call made it."""
        where = f"table {self.identifier}, epoch {epoch} version {version}"
        seal = seal_to_publish(self.ledger, self.partition, epoch, output=self.output, storage=self.storage,
                               version=version)
        view = self.ledger.corrections.sealed_version(epoch, self.partition, version)
        entry = self.ledger.corrections.version_entry(epoch, self.partition, version)
        if view is None or entry is None:
            raise PublishRefused(f"{where}: that version is not sealed; nothing is published")
        properties = {h.PIPELINE: self.ledger.pipeline, h.PARTITION: self.partition, h.ACTION: h.RESEAL,
                      h.EPOCH: str(epoch), h.VERSION: str(version), h.ATTEMPT: str(seal.attempt),
                      h.GENERATION: str(seal.generation), h.REQUEST: seal.request, h.CORRECTION: entry.correction,
                      h.RESEAL_REQUEST: entry.request, h.REASON: entry.reason[:500], h.MODE: "add_files"}
        refused = commit_failed()
        for _ in range(COMMIT_RETRIES):
            table = self.load()
            done = h.find_reseal(table, self.ledger.pipeline, self.partition, epoch, version)
            if done is not None:
                log.info("%s: already re-published as snapshot %s; nothing added", where, done.snapshot_id)
                return done, False
            live = h.live_epochs(table).get(epoch)
            if live is None or live.version >= version:
                raise PublishRefused(f"{where}: the table holds "
                                     f"{'no such epoch' if live is None else f'version {live.version}'}; "
                                     "nothing is replaced")
            table = self._evolved(table, seal.files, where)
            old = epoch_files(table, {live.snapshot_id})
            self.on_step("planned")
            for run in seal.runs:  # the snapshot names these runs' files: keep them past garbage collection
                mark_published(run, {"table": self.identifier, "epoch": epoch, "attempt": seal.attempt,
                                     "generation": seal.generation, "version": version})
            try:
                self._overwrite(table, old, seal.files, properties)
            except refused as exc:  # another writer got in: nothing of ours landed; look again
                log.info("%s: the catalog refused the commit (%s); looking again", where, exc)
                continue
            self.on_step("committed")
            record = h.find_reseal(self.load(), self.ledger.pipeline, self.partition, epoch, version)
            if record is None:
                raise PublishRefused(f"{where}: the commit returned but its snapshot is not in the table")
            log.info("%s: replaced %d file(s) with %d as snapshot %s (correction %s)", where, len(old),
                     len(seal.files), record.snapshot_id, entry.correction)
            return record, True
        raise PublishRefused(f"{where}: the catalog refused {COMMIT_RETRIES} commits in a row; try again")

    def _evolved(self, table: Any, files: tuple[str, ...], where: str) -> Any:
        """The table with the columns ``files`` add (its own catalog commit, no snapshot)."""
        if not files:
            return table
        schema = files_schema(files)
        if not registrable(schema):
            raise PublishRefused(f"{where}: the version's files cannot be registered as they are (their types "
                                 "need a rewrite); re-publishing them is not supported yet")
        if check_compatible(table.schema().as_arrow(), schema, where):
            with table.update_schema() as update:
                update.union_by_name(arrow_for_iceberg(schema))
            table = self.load()
        return table

    @staticmethod
    def _overwrite(table: Any, old: list[Any], files: tuple[str, ...], properties: dict[str, str]) -> None:
        """One commit, one snapshot: ``old`` deleted and ``files`` registered as they are."""
        from pyiceberg.io.pyarrow import parquet_file_to_data_file

        added = [parquet_file_to_data_file(table.io, table.metadata, path) for path in files]
        with table.transaction() as txn, txn.update_snapshot(snapshot_properties=properties).overwrite() as update:
            for data_file in old:
                update.delete_data_file(data_file)
            for data_file in added:
                update.append_data_file(data_file)
