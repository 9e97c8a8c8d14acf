"""Reading a published table as of an epoch (time travel by epoch), here or in a second engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.tables import history as h

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]


def _as_of(table: Any, as_of_epoch: int, version: int | None) -> tuple[int, list[Any]]:
    """The snapshot to read and its scan tasks holding epochs first..``as_of_epoch`` only.

    ``version`` None: the newest snapshot that published (or re-sealed) one of those epochs as they are
    live now (without re-seals: the publish of ``as_of_epoch``); a version: the snapshot that made that
    version of ``as_of_epoch`` live. Files of later epochs in that snapshot (a re-seal lands after them)
    are left out by the snapshot that added them.
    """
    snapshot_id = snapshot_as_of(table, as_of_epoch, version)
    live = h.live_epochs(table, snapshot_id)
    if as_of_epoch not in live:
        raise h.EpochNotPublished(f"table {h.table_name(table)}: epoch {as_of_epoch} is not live at snapshot "
                                  f"{snapshot_id}")
    keep = {record.snapshot_id for epoch, record in live.items() if epoch <= as_of_epoch}
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    added = _added_by(table, snapshot_id)
    return snapshot_id, [t for t in tasks if added.get(str(t.file.file_path)) in keep]


def snapshot_as_of(table: Any, as_of_epoch: int, version: int | None = None) -> int:
    """The id of the snapshot that shows ``table`` as of ``as_of_epoch`` (``version`` as for
    :func:`table_as_of_epoch`): with no version, the newest snapshot that published or re-sealed one of
    epochs first..``as_of_epoch`` as they are live now.

    :raises EpochNotPublished: that epoch (or that version of it) is not in the table.
    """
    if version is None:
        h.snapshot_of_epoch(table, as_of_epoch)  # raises when the epoch is not live
        wanted = {r.snapshot_id for e, r in h.live_epochs(table).items() if e <= as_of_epoch}
        return next(int(s.snapshot_id) for s in h.ancestry(table) if int(s.snapshot_id) in wanted)
    validate_version(version)
    return int(h.snapshot_of_version(table, as_of_epoch, version).snapshot_id)


def _added_by(table: Any, snapshot_id: int) -> dict[str, int]:
    """Live data file path -> the snapshot that added it, at ``snapshot_id``."""
    found: dict[str, int] = {}
    for manifest in table.snapshot_by_id(snapshot_id).manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            found[str(entry.data_file.file_path)] = int(entry.snapshot_id)
    return found


def validate_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput(f"version must be an integer >= 1 or None, not {version!r}")
    return version


def table_as_of_epoch(catalog: Any, identifier: str, as_of_epoch: int, *, version: int | None = None) -> pa.Table:
    """The rows of the published table as of epoch ``as_of_epoch`` (every epoch through it), as Arrow.

    :param version: None: every epoch at its newest published version (what ``read_sealed`` reads);
        a number: ``as_of_epoch`` at that version, as the table was when that version went in (an older
        version stays readable after a re-seal replaced it).
    :raises EpochNotPublished: that epoch (or that version of it) is not in the table.
    """
    validate_epoch(as_of_epoch)
    table = catalog.load_table(identifier)
    snapshot_id, tasks = _as_of(table, as_of_epoch, version)
    from pyiceberg.io.pyarrow import ArrowScan

    scan = table.scan(snapshot_id=snapshot_id)
    return ArrowScan(table.metadata, table.io, scan.projection(), scan.row_filter, scan.case_sensitive).to_table(tasks)


def read_sealed_as_of(spark: Any, catalog: Any, identifier: str, as_of_epoch: int, *,
                      version: int | None = None) -> Any:
    """A Spark DataFrame of the published table as of ``as_of_epoch`` (the figures ``read_sealed`` gives
    for epochs first..``as_of_epoch``, read from the Iceberg snapshot instead of the seals' manifests;
    ``version`` as for :func:`table_as_of_epoch`).

    Spark here has no Iceberg runtime, so the snapshot's files are planned by pyiceberg and read by Spark.
    """
    validate_epoch(as_of_epoch)
    table = catalog.load_table(identifier)
    snapshot_id, tasks = _as_of(table, as_of_epoch, version)
    paths = [task.file.file_path for task in tasks]
    schema_id = table.snapshot_by_id(snapshot_id).schema_id
    schema = table.schemas().get(schema_id) if schema_id is not None else None
    schema = schema or table.schema()  # the columns as of that snapshot
    columns = [f.name for f in schema.fields]
    frame = spark.read.parquet(*paths)
    from pyspark.sql import functions as F

    return frame.select(*[F.col(f"`{c}`") if c in frame.columns else F.lit(None).alias(c) for c in columns])


def epochs_in(catalog: Any, identifier: str) -> list[h.PublishedSnapshot]:
    """Every snapshot we made in the table, oldest first (publishes and rollbacks)."""
    table = catalog.load_table(identifier)
    records = [h.published(s) for s in table.snapshots()]
    return [r for r in records if r is not None]


def snapshot_id_of_epoch(catalog: Any, identifier: str, epoch: int) -> int:
    """The id of the snapshot that shows the table as of ``epoch``: epochs first..``epoch`` at their newest
    published versions and no later epoch, for readers that take a snapshot id (DuckDB's ``iceberg_scan``).

    Not the publish of ``epoch`` itself: an earlier epoch re-sealed after it changed what it shows. A re-seal
    of an epoch through ``epoch`` committed after later epochs were published holds those too: then no
    snapshot shows the table as of ``epoch`` alone, and :func:`table_as_of_epoch` (or
    :func:`as_of_files`) reads it.

    :raises EpochNotPublished: that epoch is not in the table.
    :raises NoSnapshotOfItsOwn: no snapshot shows epochs first..``epoch`` without later ones.
    """
    validate_epoch(epoch)
    table = catalog.load_table(identifier)
    snapshot_id = snapshot_as_of(table, epoch)
    later = sorted(e for e in h.live_epochs(table, snapshot_id) if e > epoch)
    if later:
        raise h.NoSnapshotOfItsOwn(
            f"table {h.table_name(table)}: no snapshot shows it as of epoch {epoch} alone: the newest one of epochs "
            f"through {epoch} ({snapshot_id}, a re-seal) also holds epoch(s) {later}; read it by its files")
    return snapshot_id


def as_of_files(catalog: Any, identifier: str, epoch: int) -> tuple[int, list[str]]:
    """The snapshot that holds ``epoch`` at its newest published version and the data files of epochs
    first..``epoch`` in it (the newest versions; no later epoch): what reads the table as of ``epoch``
    where :func:`snapshot_id_of_epoch` finds no snapshot of its own.

    :raises EpochNotPublished: that epoch is not in the table.
    """
    validate_epoch(epoch)
    snapshot_id, tasks = _as_of(catalog.load_table(identifier), epoch, None)
    return snapshot_id, [str(t.file.file_path) for t in tasks]
