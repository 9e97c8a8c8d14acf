"""Publish sealed partitions into an Apache Iceberg table: one snapshot per sealed (epoch, partition).

The seal in ZooKeeper is the commit point; publishing follows it and may be repeated until it is done.
Each publish registers the Parquet files the seal's manifests name (``add_files``: no rewrite), or,
where the files cannot be registered as they are, writes their rows through pyiceberg, as ONE catalog
commit whose snapshot summary names the pipeline, partition, epoch, attempt, generation and the seal's
request id. That makes it exactly once:

- a publish holds the table's publish lock in ZooKeeper from reading the table to its last commit
  (``airflow_epochs.tables.commit_guard``): a second publisher waits, then finds the snapshots;
- a repeat (after a crash before the commit, or after it but before anyone learned of it) first looks
  for a snapshot with those properties, and adds nothing when it finds one;
- pyiceberg's own commit retry is off on our tables: a commit the catalog refuses (another writer got
  in, e.g. after our lock's session expired) reaches us; we read the table again and, when the winner's
  snapshot is this seal's, answer with it as if we had made it;
- only what the ledger says is sealed now is published: an unsealed, superseded or rolled-back
  attempt has no current seal, so no snapshot is made for it; a rollback that lands between the seal
  check and the commit is found by checking the seals again after the commits, still under the lock,
  and undone there by a rollback snapshot (:class:`RolledBackWhilePublishing`);
- a live epoch re-sealed as a newer version gets that version's files in one snapshot per re-seal
  (:mod:`airflow_epochs.tables.reseal_publish`), before new epochs are published;
- epochs go in order: a publish of epoch e first publishes every sealed epoch after the table's
  newest one, up to e;
- a ledger rollback is mirrored before anything else: live epochs whose seal is no longer current are
  removed in one snapshot (``epochs.action=rollback``), and the table is as it was at the epoch rolled
  back to;
- a table broken by an earlier double commit is refused (:class:`TableBroken`, with what to do);
- schema: a column the files add evolves the table by name; a column whose type changed
  incompatibly stops the publish with :class:`IncompatibleSchema` naming it, before any commit.

The ``on_step`` hook sees each step's name (``planned``, ``schema``, ``committed``) just after it; the
crash tests kill the process there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import PartitionNotSealed
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.wire.events import Rollback
from airflow_epochs.spark.storage import mark_published
from airflow_epochs.tables import history as h
from airflow_epochs.tables.columns import (
    arrow_for_iceberg,
    check_compatible,
    files_schema,
    readable,
    registrable,
)
from airflow_epochs.tables.commit_guard import (
    LOCK_TIMEOUT_S,
    NO_RETRIES,
    commit_failed,
    publish_lock,
    without_client_retries,
)
from airflow_epochs.tables.integrity import raise_if_broken
from airflow_epochs.tables.reseal_publish import ResealPublisher
from airflow_epochs.tables.run_markers import RUN_MARKERS, mark_earlier_runs
from airflow_epochs.tables.seal_files import (
    PublishRefused,
    SealToPublish,
    check_identifier,
    seal_to_publish,
    still_sealed,
)

log = logging.getLogger(__name__)

StepHook = Callable[[str], None]
COMMIT_RETRIES = 5


class RolledBackWhilePublishing(PartitionNotSealed):
    """The ledger rolled back an epoch while this publish committed it: the table was set back (a
    rollback snapshot, under the same lock hold) and the epoch is not published."""


@dataclass(frozen=True)
class PublishOutcome:
    """What a publish did: per epoch, the snapshot (new or found) and whether this call made it."""

    table: str
    partition: str
    published: tuple[h.PublishedSnapshot, ...] = ()
    already: tuple[h.PublishedSnapshot, ...] = ()
    rolled_back: h.PublishedSnapshot | None = None
    metadata_location: str = ""
    modes: Mapping[int, str] = field(default_factory=dict)
    resealed: tuple[h.PublishedSnapshot, ...] = ()  # re-seal snapshots made or found (a newer version's files)

    def snapshot_of(self, epoch: int) -> int | None:
        for record in (*self.resealed, *self.published, *self.already):
            if record.epoch == epoch:
                return record.snapshot_id
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "partition": self.partition,
                "published": [r.to_dict() for r in self.published], "already": [r.to_dict() for r in self.already],
                "rolled_back": None if self.rolled_back is None else self.rolled_back.to_dict(),
                "metadata_location": self.metadata_location, "modes": {str(k): v for k, v in self.modes.items()},
                "resealed": [r.to_dict() for r in self.resealed]}


class Publisher:
    """Publishes ``partition`` of ``ledger``'s pipeline into the Iceberg table ``identifier``.

    :param ledger: the pipeline's ledger (what is sealed is read from it; its publish lock is taken).
    :param catalog: a pyiceberg catalog (see :func:`airflow_epochs.tables.catalog.load_catalog`).
    :param identifier: ``namespace.table``; created on the first publish.
    :param partition: the partition it holds (one table holds one partition of one pipeline).
    :param output: which output of the producers' manifests (default ``data``).
    :param on_step: called with each step's name just after it (crash tests).
    :param storage: the pipeline's storage root; when given, the run folders the manifests name must be
        inside it (they must follow the storage layout either way) before a marker is written.
    :param lock_timeout: seconds to wait for the table's publish lock (:class:`LockTimeout` after).
    """

    def __init__(self, ledger: EpochLedger, catalog: Any, identifier: str, partition: str, *, output: str = "data",
                 on_step: StepHook | None = None, storage: str | None = None,
                 lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.namespace, self.name = check_identifier(identifier)
        validate_name("partition", partition)
        self.identifier = identifier
        self.ledger = ledger
        self.catalog = catalog
        self.partition = partition
        self.output = output
        self.on_step = on_step or (lambda _step: None)
        self.storage = storage
        self.lock_timeout = lock_timeout

    # -- the table -------------------------------------------------------------------------------

    def load(self) -> Any | None:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _reload(self) -> Any:
        return self.catalog.load_table(self.identifier)

    def _create(self, schema: Any) -> Any:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

        with contextlib.suppress(NamespaceAlreadyExistsError):
            self.catalog.create_namespace(self.namespace)
        try:
            return self.catalog.create_table(self.identifier, schema=arrow_for_iceberg(schema),
                                             properties={"epochs.pipeline": self.ledger.pipeline,
                                                         "epochs.partition": self.partition, RUN_MARKERS: "1",
                                                         **NO_RETRIES})
        except TableAlreadyExistsError:  # created by a writer that does not take our lock
            return without_client_retries(self._reload(), self._reload, f"table {self.identifier}")

    def _checked(self, table: Any) -> Any:
        """The table after the checks every locked step starts with: ours, whole, no client retries."""
        h.check_owner(table, self.ledger.pipeline, self.partition)
        raise_if_broken(table, self.identifier)
        return without_client_retries(table, self._reload, f"table {self.identifier}")

    # -- publishing ------------------------------------------------------------------------------

    def publish(self, through_epoch: int) -> PublishOutcome:
        """Publish every sealed epoch after the table's newest one, through ``through_epoch``, in order
        (mirroring a ledger rollback first). Repeatable: what is published already is found, not redone.

        :raises PartitionNotSealed: ``through_epoch`` (or an epoch before it) has no current seal;
            the epochs before it were published.
        :raises RolledBackWhilePublishing: the ledger rolled back an epoch of this publish before its
            commit; the table was set back to the epoch rolled back to.
        :raises TableBroken: the table holds an epoch twice (or another damage); nothing was written.
        :raises LockTimeout: another publisher of the table held its lock for ``lock_timeout`` seconds.
        """
        validate_epoch(through_epoch)
        with publish_lock(self.ledger, self.catalog, self.identifier, timeout=self.lock_timeout):
            return self._publish_locked(through_epoch)

    def _publish_locked(self, through_epoch: int) -> PublishOutcome:
        table = self.load()
        rolled_back = None
        if table is not None:
            table = self._checked(table)
            if table.properties.get(RUN_MARKERS) != "1":
                mark_earlier_runs(table, identifier=self.identifier, pipeline=self.ledger.pipeline,
                                  partition=self.partition, storage=self.storage)
                table = self._reload()  # the property's commit made a new metadata version
            rolled_back = self._mirror_rollback(table)
            table = self.load()
        resealed = ResealPublisher(self.ledger, self.load, identifier=self.identifier, partition=self.partition,
                                   output=self.output, storage=self.storage,
                                   on_step=self.on_step).publish_pending(through_epoch)
        newest = None if table is None else h.last_published_epoch(table)
        start = self._first_epoch() if newest is None else newest + 1
        published: list[h.PublishedSnapshot] = []
        already: list[h.PublishedSnapshot] = []
        modes: dict[int, str] = {}
        if newest is not None and through_epoch <= newest and table is not None:
            seal = seal_to_publish(self.ledger, self.partition, through_epoch, output=self.output,
                                   storage=self.storage)
            found = self._find(table, seal)
            if found is None:  # defensive: a live epoch that is not this seal is mirrored away above
                raise PublishRefused(f"table {self.identifier}: epoch {through_epoch} is live but from another seal")
            already.append(found)
        try:
            for epoch in range(start, through_epoch + 1):
                record, made, mode = self._publish_epoch(epoch)
                (published if made else already).append(record)
                if made:
                    modes[epoch] = mode
        finally:
            self._fence([*resealed[0], *published])
        table = self.load()
        return PublishOutcome(self.identifier, self.partition, tuple(published), tuple(already), rolled_back,
                              "" if table is None else str(table.metadata_location), modes,
                              (*resealed[0], *resealed[1]))

    def _fence(self, published: list[h.PublishedSnapshot]) -> None:
        """After the commits, still under the lock: an epoch committed here whose seal a rollback took
        away between our check and our commit is undone now, before anyone is told it was published."""
        stale = [r.epoch for r in published if not still_sealed(self.ledger, self.partition, r)]
        if not stale:
            return
        table = self._reload()
        undone = self._mirror_rollback(table)
        raise RolledBackWhilePublishing(
            f"table {self.identifier}: epoch(s) {stale} of {self.partition!r} were rolled back in the ledger while "
            f"this publish committed them; the table was set back to epoch "
            f"{None if undone is None else undone.epoch} (snapshot {None if undone is None else undone.snapshot_id})")

    def _publish_epoch(self, epoch: int) -> tuple[h.PublishedSnapshot, bool, str]:
        """Publish the current seal of ``epoch`` (the previous epoch must be the table's newest); under
        the lock. Returns the snapshot record, whether this call made it (or found it made by a writer
        that beat our commit), and how (``add_files`` or ``write``)."""
        seal = seal_to_publish(self.ledger, self.partition, epoch, output=self.output, storage=self.storage)
        where = f"table {self.identifier}, epoch {epoch}"
        refused = commit_failed()
        for _ in range(COMMIT_RETRIES):
            table = self.load()
            if table is not None:
                found = self._find(table, seal)
                if found is not None:
                    log.info("%s: already published as snapshot %s; nothing added", where, found.snapshot_id)
                    return found, False, ""
                newest = h.last_published_epoch(table)
                if newest is not None and newest != epoch - 1:
                    raise PublishRefused(f"{where}: the table's newest epoch is {newest}; epochs are published in "
                                         f"order, so {epoch} waits for {epoch - 1}")
            try:
                table, mode = self._prepare(table, seal, where)
                self._commit(table, seal, mode)
            except (refused, ValueError) as exc:
                # ValueError: add_files saw the files registered already (a writer got in after our look)
                if isinstance(exc, ValueError) and "already referenced" not in str(exc):
                    raise
                # Another writer got in (our lock's session may have expired under us): nothing of ours
                # landed. If the winner committed this very seal, that is our answer.
                winner = self.load()
                found = None if winner is None else self._find(winner, seal)
                if winner is not None and found is not None:
                    log.info("%s: the catalog refused our commit; snapshot %s of another publisher has this seal",
                             where, found.snapshot_id)
                    return found, True, h.summary_properties(winner.snapshot_by_id(found.snapshot_id)).get(h.MODE, "")
                log.info("%s: the catalog refused the commit (%s); looking again", where, exc)
                continue
            self.on_step("committed")
            table = self.load()
            found = self._find(table, seal) if table is not None else None
            if found is None:
                raise PublishRefused(f"{where}: the commit returned but its snapshot is not in the table")
            log.info("%s: published %d file(s) as snapshot %s (%s)", where, len(seal.files), found.snapshot_id,
                     mode)
            return found, True, mode
        raise PublishRefused(f"{where}: the catalog refused {COMMIT_RETRIES} commits in a row; try again")

    def _prepare(self, table: Any | None, seal: SealToPublish, where: str) -> tuple[Any, str]:
        """The table (created, its schema evolved) ready for ``seal``'s commit, and the commit's mode."""
        schema = files_schema(seal.files) if seal.files else None
        if table is None and schema is None:
            raise PublishRefused(f"{where}: the first epoch to publish has no files to take a schema from")
        if table is None:
            assert schema is not None
            table = self._create(schema)
        mode = "add_files"
        if schema is not None:
            added = check_compatible(table.schema().as_arrow(), schema, where)
            mode = "add_files" if registrable(schema) else "write"
            self.on_step("planned")
            if added:
                # Its own catalog commit, but no snapshot: a repeat finds the columns there.
                with table.update_schema() as update:
                    update.union_by_name(arrow_for_iceberg(schema))
                log.info("%s: the table gains column(s) %s", where, added)
                table = self._reload()
            self.on_step("schema")
        else:
            self.on_step("planned")
            self.on_step("schema")
        return table, mode

    def _commit(self, table: Any, seal: SealToPublish, mode: str) -> None:
        properties = self._properties(seal, mode)
        if mode == "add_files":  # the snapshot will name these runs' files: keep them past a rollback
            for run in seal.runs:
                mark_published(run, {"table": self.identifier, "epoch": seal.epoch, "attempt": seal.attempt,
                                     "generation": seal.generation})
            table.add_files(list(seal.files), snapshot_properties=properties, check_duplicate_files=True)
        else:
            table.append(readable(seal.files, table.schema().as_arrow()), snapshot_properties=properties)

    def mirror_rollback(self) -> h.PublishedSnapshot | None:
        """Mirror a ledger rollback into the table now, under its publish lock (a publish does this
        first anyway); None if there is no table or nothing to do."""
        with publish_lock(self.ledger, self.catalog, self.identifier, timeout=self.lock_timeout):
            table = self.load()
            return None if table is None else self._mirror_rollback(self._checked(table))

    def _mirror_rollback(self, table: Any) -> h.PublishedSnapshot | None:
        """Remove, in one snapshot, the live epochs whose seal is no longer current (the ledger rolled
        them back), so the table is as it was at the epoch rolled back to. None if nothing to do."""
        live = h.live_epochs(table)
        stale = [e for e, record in live.items() if not still_sealed(self.ledger, self.partition, record)]
        if not stale:
            return None
        to_epoch = min(stale) - 1
        removed = sorted(e for e in live if e > to_epoch)
        request = self._rollback_request(to_epoch)
        drop = {live[e].snapshot_id for e in removed}
        files = self._files_added_by(table, drop)
        properties = {h.PIPELINE: self.ledger.pipeline, h.PARTITION: self.partition, h.ACTION: h.ROLLBACK,
                      h.ROLLBACK_TO: str(to_epoch), h.REMOVED_EPOCHS: ",".join(map(str, removed)),
                      h.REQUEST: request}
        self.on_step("planned")
        with table.transaction() as txn, txn.update_snapshot(snapshot_properties=properties).overwrite() as update:
            for data_file in files:
                update.delete_data_file(data_file)
        self.on_step("committed")
        after = self.load()
        record = None if after is None else h.published(after.current_snapshot())
        log.info("table %s: rolled back to epoch %s (removed epochs %s, %d file(s)) as snapshot %s",
                 self.identifier, to_epoch, removed, len(files), None if record is None else record.snapshot_id)
        return record

    # -- helpers ---------------------------------------------------------------------------------

    def _properties(self, seal: SealToPublish, mode: str) -> dict[str, str]:
        return {h.PIPELINE: self.ledger.pipeline, h.PARTITION: self.partition, h.ACTION: h.PUBLISH,
                h.EPOCH: str(seal.epoch), h.ATTEMPT: str(seal.attempt), h.GENERATION: str(seal.generation),
                h.REQUEST: seal.request, h.MODE: mode, h.VERSION: str(seal.version)}

    def _find(self, table: Any, seal: SealToPublish) -> h.PublishedSnapshot | None:
        return h.find_publish(table, self.ledger.pipeline, self.partition, seal.epoch, seal.attempt, seal.generation,
                              seal.request)

    def _first_epoch(self) -> int:
        versions = self.ledger.config_versions()
        return min(v.from_epoch for v in versions) if versions else 1

    def _rollback_request(self, to_epoch: int) -> str:
        """The request id of the ledger's newest rollback to ``to_epoch`` or before (the record we mirror)."""
        for event in reversed(self.ledger.history()):
            record = event.record
            if isinstance(record, Rollback) and record.to_epoch <= to_epoch:
                # the rollback's own request id; an event written before it was stored: its sequence number
                return record.request or f"rollback-seq-{event.seq}"
        return f"rollback-to-{to_epoch}"

    @staticmethod
    def _files_added_by(table: Any, snapshot_ids: set[int]) -> list[Any]:
        snapshot = table.current_snapshot()
        if snapshot is None:
            return []
        files = []
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.snapshot_id in snapshot_ids:
                    files.append(entry.data_file)
        return files


def publish_sealed(ledger: EpochLedger, catalog: Any, identifier: str, partition: str, epoch: int, *,
                   output: str = "data", on_step: StepHook | None = None, storage: str | None = None
                   ) -> PublishOutcome:
    """Publish ``partition`` through ``epoch`` into ``identifier`` (see :class:`Publisher`)."""
    return Publisher(ledger, catalog, identifier, partition, output=output, on_step=on_step,
                     storage=storage).publish(epoch)


def mirror_rollback(ledger: EpochLedger, catalog: Any, identifier: str, partition: str) -> h.PublishedSnapshot | None:
    """Mirror a ledger rollback into the table now (a publish does this first anyway)."""
    return Publisher(ledger, catalog, identifier, partition).mirror_rollback()
