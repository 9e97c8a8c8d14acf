"""Publish sealed partitions into an Apache Iceberg table: one snapshot per sealed (epoch, partition).

The seal in ZooKeeper is the commit point; publishing follows it and may be repeated until it is done.
Each publish registers the Parquet files the seal's manifests name (``add_files``: no rewrite), or,
where the files cannot be registered as they are, writes their rows through pyiceberg, as ONE catalog
commit whose snapshot summary names the pipeline, partition, epoch, attempt, generation and the seal's
request id. That makes it exactly once:

- a repeat (after a crash before the commit, or after it but before anyone learned of it) first looks
  for a snapshot with those properties, and adds nothing when it finds one;
- two publishers racing both check, but the catalog's commit compares the table's current snapshot
  (optimistic concurrency): the loser's commit fails, it reloads, finds the winner's snapshot;
- only what the ledger says is sealed now is published: an unsealed, superseded or rolled-back
  attempt has no current seal, so no snapshot is ever made for it;
- epochs go in order: a publish of epoch e first publishes every sealed epoch after the table's
  newest one, up to e;
- a ledger rollback is mirrored before anything else: live epochs whose seal is no longer current are
  removed in one snapshot (``epochs.action=rollback``), and the table is as it was at the epoch rolled
  back to;
- schema: a column the files add evolves the table by name; a column whose type changed
  incompatibly stops the publish with :class:`IncompatibleSchema` naming it, before any commit.

The ``on_step`` hook sees each step's name (``planned``, ``schema``, ``committed``) just after it; the
crash tests kill the process there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput, PartitionNotSealed
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.spark.sealed import sealed_outputs
from airflow_epochs.spark.storage import data_files, filesystem, mark_published
from airflow_epochs.tables import history as h
from airflow_epochs.tables.run_folders import RunOutsideStorage, check_run_folder, run_folder_of

log = logging.getLogger(__name__)

StepHook = Callable[[str], None]
COMMIT_RETRIES = 5
# A table property: every run folder the table's snapshots name carries the published marker (set on a
# new table; an older table gets its markers written by the next publish, then this property).
RUN_MARKERS = "epochs.run-markers"
# Lossless type widenings Iceberg allows in place (schema evolution by name).
_PROMOTIONS = {(pa.int32(), pa.int64()), (pa.float32(), pa.float64())}


class IncompatibleSchema(EpochsError):
    """A sealed output's column does not fit the table's column of that name; nothing was committed."""


class PublishRefused(EpochsError):
    """The publish cannot go on as asked (e.g. files the manifest does not vouch for); nothing was committed."""


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

    def snapshot_of(self, epoch: int) -> int | None:
        for record in (*self.published, *self.already):
            if record.epoch == epoch:
                return record.snapshot_id
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "partition": self.partition,
                "published": [r.to_dict() for r in self.published], "already": [r.to_dict() for r in self.already],
                "rolled_back": None if self.rolled_back is None else self.rolled_back.to_dict(),
                "metadata_location": self.metadata_location, "modes": {str(k): v for k, v in self.modes.items()}}


@dataclass(frozen=True)
class SealToPublish:
    """A current seal and the Parquet files its manifests name."""

    epoch: int
    attempt: int
    generation: int
    request: str
    files: tuple[str, ...]
    runs: tuple[str, ...] = ()  # the run directories holding the files


def check_identifier(identifier: str) -> tuple[str, str]:
    """``namespace.table`` -> (namespace, table), each a plain name."""
    parts = identifier.split(".") if isinstance(identifier, str) else []
    if len(parts) != 2 or not all(p.replace("_", "a").isalnum() for p in parts):
        raise InvalidInput(f"an Iceberg table is named 'namespace.table' (letters, digits, _), not {identifier!r}")
    return parts[0], parts[1]


def still_sealed(ledger: EpochLedger, partition: str, record: h.PublishedSnapshot) -> bool:
    """Whether the table's publish ``record`` of ``partition`` is still what the ledger has sealed: the
    partition's current seal at that epoch is the one published (attempt, generation and request).

    False when the epoch was rolled back or the partition has no seal at it now (e.g. it left the
    configuration when the epoch was sealed again); true for an epoch retention compacted (its seal
    stood and is gone from ZooKeeper) or that the ledger never recorded.
    """
    info = ledger.epoch_info(record.epoch)
    if info is None or info.attempt_state == "compacted":  # retention dropped its seal, which stood
        return True
    if info.state == "rolled_back":
        return False
    seal = ledger.seal_record(record.epoch, partition)
    return seal is not None and (seal.attempt, seal.generation, seal.request) == \
        (record.attempt, record.generation, record.request)


def seal_to_publish(ledger: EpochLedger, partition: str, epoch: int, *, output: str = "data",
                    storage: str | None = None) -> SealToPublish:
    """The current seal of ``partition`` at ``epoch`` and its files, checked against the manifests.

    :param storage: the pipeline's storage root: every run folder must be inside it (when given).
    :raises PartitionNotSealed: no current seal (unsealed, superseded or rolled back): nothing to publish.
    :raises RunOutsideStorage: a manifest names a folder that is not the seal's run folder (by the layout,
        under ``storage``); nothing is written.
    """
    seal = ledger.seal(epoch, partition)
    record = ledger.seal_record(epoch, partition)
    if seal is None or record is None:
        raise PartitionNotSealed(f"pipeline {ledger.pipeline!r}: partition {partition!r} is not sealed at epoch "
                                 f"{epoch}; nothing is published")
    files: list[str] = []
    runs: list[str] = []
    for item in sealed_outputs(ledger, partition, [epoch], output=output):
        check_run_folder(item.location, pipeline=ledger.pipeline, partition=partition, epoch=epoch,
                         attempt=item.attempt, storage=storage)
        if item.format != "parquet":
            raise PublishRefused(f"epoch {epoch}: {partition!r} output {output!r} of {item.producer!r} is "
                                 f"{item.format}; only Parquet outputs are published")
        found = [f"{item.path.rstrip('/')}/{name}" for name, _ in data_files(item.path)]
        manifest = seal.manifests.get(item.producer) or {}
        vouched = ((manifest.get("outputs") or {}).get(output) or {}).get("files")
        if vouched is not None and int(vouched) != len(found):
            raise PublishRefused(f"epoch {epoch}: the manifest of {item.producer!r} names {vouched} file(s) under "
                                 f"{item.path}, {len(found)} are there; nothing is published")
        files += found
        runs.append(item.location)
    return SealToPublish(epoch, seal.attempt, seal.generation, record.request, tuple(files), tuple(runs))


def files_schema(files: Iterable[str]) -> pa.Schema:
    """The union (by name) of the Parquet files' schemas, field order of first appearance."""
    fields: dict[str, pa.Field] = {}
    for path in files:
        fs, local = filesystem(path)
        with fs.open_input_file(local) as stream:
            schema = pq.read_schema(stream)
        for f in schema:
            fields.setdefault(f.name, f)
    return pa.schema(list(fields.values()))


def check_compatible(table_schema: pa.Schema, new: pa.Schema, where: str) -> list[str]:
    """The columns ``new`` adds; raises :class:`IncompatibleSchema` naming a column whose type changed."""
    added = []
    for f in new:
        idx = table_schema.get_field_index(f.name)
        if idx < 0:
            added.append(f.name)
            continue
        have = table_schema.field(idx).type
        if _same_type(have, f.type) or (have, f.type) in _PROMOTIONS or (f.type, have) in _PROMOTIONS:
            continue
        raise IncompatibleSchema(f"{where}: column {f.name!r} is {f.type} in the sealed files but {have} in the "
                                 f"table; nothing was committed")
    return added


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if a == b:
        return True
    strings = (pa.string(), pa.large_string())
    binaries = (pa.binary(), pa.large_binary())
    if (a in strings and b in strings) or (a in binaries and b in binaries):
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return bool(a.tz) == bool(b.tz)
    return False


def _registrable(schema: pa.Schema) -> bool:
    """Whether ``add_files`` can take files of this schema as they are: no Iceberg field ids in them
    (ours come from the table's name mapping) and no nanosecond timestamps (Spark's INT96)."""
    for f in schema:
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            return False
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            return False
    return True


def _readable(files: Iterable[str], target: pa.Schema) -> pa.Table:
    """The files' rows as one Arrow table in the table's column order (timestamps to microseconds)."""
    parts = []
    for path in files:
        fs, local = filesystem(path)
        with fs.open_input_file(local) as stream:
            part = pq.read_table(stream)
        columns = []
        for f in target:
            if f.name in part.column_names:
                col = part.column(f.name)
                columns.append(col.cast(f.type) if col.type != f.type else col)
            else:
                columns.append(pa.nulls(part.num_rows, f.type))
        parts.append(pa.table(columns, schema=target))
    return pa.concat_tables(parts) if parts else target.empty_table()


def _arrow_for_iceberg(schema: pa.Schema) -> pa.Schema:
    fields = []
    for f in schema:
        kind = f.type
        if pa.types.is_timestamp(kind) and kind.unit == "ns":
            kind = pa.timestamp("us", tz=kind.tz)
        fields.append(pa.field(f.name, kind, nullable=True))
    return pa.schema(fields)


class Publisher:
    """Publishes ``partition`` of ``ledger``'s pipeline into the Iceberg table ``identifier``.

    :param ledger: the pipeline's ledger (what is sealed is read from it, never written).
    :param catalog: a pyiceberg catalog (see :func:`airflow_epochs.tables.catalog.load_catalog`).
    :param identifier: ``namespace.table``; created on the first publish.
    :param partition: the partition it holds (one table holds one partition of one pipeline).
    :param output: which output of the producers' manifests (default ``data``).
    :param on_step: called with each step's name just after it (crash tests).
    :param storage: the pipeline's storage root; when given, the run folders the manifests name must be
        inside it (they must follow the storage layout either way) before a marker is written.
    """

    def __init__(self, ledger: EpochLedger, catalog: Any, identifier: str, partition: str, *, output: str = "data",
                 on_step: StepHook | None = None, storage: str | None = None) -> None:
        self.namespace, self.name = check_identifier(identifier)
        validate_name("partition", partition)
        self.identifier = identifier
        self.ledger = ledger
        self.catalog = catalog
        self.partition = partition
        self.output = output
        self.on_step = on_step or (lambda _step: None)
        self.storage = storage

    # -- the table -------------------------------------------------------------------------------

    def load(self) -> Any | None:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _create(self, schema: pa.Schema) -> Any:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

        with contextlib.suppress(NamespaceAlreadyExistsError):
            self.catalog.create_namespace(self.namespace)
        try:
            return self.catalog.create_table(self.identifier, schema=_arrow_for_iceberg(schema),
                                             properties={"epochs.pipeline": self.ledger.pipeline,
                                                         "epochs.partition": self.partition, RUN_MARKERS: "1"})
        except TableAlreadyExistsError:  # another publisher created it first
            return self.catalog.load_table(self.identifier)

    # -- publishing ------------------------------------------------------------------------------

    def publish(self, through_epoch: int) -> PublishOutcome:
        """Publish every sealed epoch after the table's newest one, through ``through_epoch``, in order
        (mirroring a ledger rollback first). Repeatable: what is published already is found, not redone.

        :raises PartitionNotSealed: ``through_epoch`` (or an epoch before it) has no current seal;
            the epochs before it were published.
        """
        validate_epoch(through_epoch)
        table = self.load()
        rolled_back = None
        if table is not None:
            h.check_owner(table, self.ledger.pipeline, self.partition)
            if table.properties.get(RUN_MARKERS) != "1":
                self.mark_earlier_runs(table)
                table = self.load()  # the property's commit made a new metadata version
        if table is not None:
            rolled_back = self.mirror_rollback(table)
            table = self.load()
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
        for epoch in range(start, through_epoch + 1):
            record, made, mode = self.publish_epoch(epoch)
            (published if made else already).append(record)
            if made:
                modes[epoch] = mode
        table = self.load()
        return PublishOutcome(self.identifier, self.partition, tuple(published), tuple(already), rolled_back,
                              "" if table is None else str(table.metadata_location), modes)

    def publish_epoch(self, epoch: int) -> tuple[h.PublishedSnapshot, bool, str]:
        """Publish the current seal of ``epoch`` (the previous epoch must be the table's newest).

        Returns the snapshot record, whether this call made it, and how (``add_files`` or ``write``).
        """
        seal = seal_to_publish(self.ledger, self.partition, epoch, output=self.output, storage=self.storage)
        where = f"table {self.identifier}, epoch {epoch}"
        for _ in range(COMMIT_RETRIES):
            from pyiceberg.exceptions import CommitFailedException

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
            schema = files_schema(seal.files) if seal.files else None
            if table is None and schema is None:
                raise PublishRefused(f"{where}: the first epoch to publish has no files to take a schema from")
            if table is None:
                assert schema is not None
                table = self._create(schema)
            mode = "add_files"
            if schema is not None:
                current = table.schema().as_arrow()
                added = check_compatible(current, schema, where)
                mode = "add_files" if _registrable(schema) else "write"
                self.on_step("planned")
                if added:
                    # Its own catalog commit, but no snapshot: a repeat finds the columns there.
                    with table.update_schema() as update:
                        update.union_by_name(_arrow_for_iceberg(schema))
                    log.info("%s: the table gains column(s) %s", where, added)
                    table = self.load()
                self.on_step("schema")
            else:
                self.on_step("planned")
                self.on_step("schema")
            properties = self._properties(seal, mode)
            assert table is not None  # loaded or created above
            if mode == "add_files":  # the snapshot will name these runs' files: keep them past a rollback
                for run in seal.runs:
                    mark_published(run, {"table": self.identifier, "epoch": seal.epoch, "attempt": seal.attempt,
                                         "generation": seal.generation})
            try:
                if mode == "add_files":
                    table.add_files(list(seal.files), snapshot_properties=properties, check_duplicate_files=True)
                else:
                    rows = _readable(seal.files, table.schema().as_arrow())
                    table.append(rows, snapshot_properties=properties)
            except CommitFailedException as exc:
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

    def mirror_rollback(self, table: Any) -> h.PublishedSnapshot | None:
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

    def mark_earlier_runs(self, table: Any) -> list[str]:
        """Mark the run folders named by the table's snapshots published before the marker existed
        (garbage collection would take them), once per table; returns the folders marked now."""
        if table.properties.get(RUN_MARKERS) == "1":
            return []
        marked, unreachable = [], 0
        for folder, record in runs_named_by(table).items():
            try:
                check_run_folder(folder, pipeline=self.ledger.pipeline, partition=self.partition, epoch=record.epoch,
                                 attempt=record.attempt, storage=self.storage)
                mark_published(folder, {"table": self.identifier, "epoch": record.epoch, "attempt": record.attempt,
                                        "generation": record.generation})
            except (RunOutsideStorage, InvalidInput) as exc:  # refused, or the folder is gone already
                log.warning("table %s: run folder of epoch %s not marked: %s", self.identifier, record.epoch, exc)
                continue
            except OSError as exc:  # storage unreachable now: the next publish tries again
                log.warning("table %s: run folder of epoch %s not marked yet: %s", self.identifier, record.epoch, exc)
                unreachable += 1
                continue
            marked.append(folder)
        if unreachable:
            return marked
        with table.transaction() as txn:
            txn.set_properties({RUN_MARKERS: "1"})
        log.info("table %s: marked %d run folder(s) published before markers existed", self.identifier, len(marked))
        return marked

    # -- helpers ---------------------------------------------------------------------------------

    def _properties(self, seal: SealToPublish, mode: str) -> dict[str, str]:
        return {h.PIPELINE: self.ledger.pipeline, h.PARTITION: self.partition, h.ACTION: h.PUBLISH,
                h.EPOCH: str(seal.epoch), h.ATTEMPT: str(seal.attempt), h.GENERATION: str(seal.generation),
                h.REQUEST: seal.request, h.MODE: mode}

    def _find(self, table: Any, seal: SealToPublish) -> h.PublishedSnapshot | None:
        return h.find_publish(table, self.ledger.pipeline, self.partition, seal.epoch, seal.attempt, seal.generation,
                              seal.request)

    def _first_epoch(self) -> int:
        versions = self.ledger.config_versions()
        return min(v.from_epoch for v in versions) if versions else 1

    def _rollback_request(self, to_epoch: int) -> str:
        """The request id of the ledger's newest rollback to ``to_epoch`` or before (the record we mirror)."""
        for event in reversed(self.ledger.history()):
            if event.event == "rollback" and int(event.detail.get("to_epoch", -1)) <= to_epoch:
                return str(event.detail.get("request") or f"rollback-seq-{event.seq}")
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


def runs_named_by(table: Any) -> dict[str, h.PublishedSnapshot]:
    """Run folder -> the publish snapshot that registered files in it (``add_files``; a ``write``
    publish copied the rows into the table's own files)."""
    found: dict[str, h.PublishedSnapshot] = {}
    for snapshot in table.snapshots():
        record = h.published(snapshot)
        if record is None or record.action != h.PUBLISH or h.summary_properties(snapshot).get(h.MODE) == "write":
            continue
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                folder = run_folder_of(str(entry.data_file.file_path)) if entry.snapshot_id == record.snapshot_id \
                    else None
                if folder is not None:
                    found.setdefault(folder, record)
    return found


def publish_sealed(ledger: EpochLedger, catalog: Any, identifier: str, partition: str, epoch: int, *,
                   output: str = "data", on_step: StepHook | None = None, storage: str | None = None
                   ) -> PublishOutcome:
    """Publish ``partition`` through ``epoch`` into ``identifier`` (see :class:`Publisher`)."""
    return Publisher(ledger, catalog, identifier, partition, output=output, on_step=on_step,
                     storage=storage).publish(epoch)


def mirror_rollback(ledger: EpochLedger, catalog: Any, identifier: str, partition: str) -> h.PublishedSnapshot | None:
    """Mirror a ledger rollback into the table now (a publish does this first anyway)."""
    publisher = Publisher(ledger, catalog, identifier, partition)
    table = publisher.load()
    return None if table is None else publisher.mirror_rollback(table)
