"""Reading a published table as of an epoch (time travel by epoch), here or in a second engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.tables import history as h

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]


def table_as_of_epoch(catalog: Any, identifier: str, as_of_epoch: int) -> pa.Table:
    """The rows of the published table as of epoch ``as_of_epoch`` (every epoch through it), as Arrow.

    :raises EpochNotPublished: that epoch is not live in the table (not published yet, or rolled back).
    """
    validate_epoch(as_of_epoch)
    table = catalog.load_table(identifier)
    record = h.snapshot_of_epoch(table, as_of_epoch)
    return table.scan(snapshot_id=record.snapshot_id).to_arrow()


def read_sealed_as_of(spark: Any, catalog: Any, identifier: str, as_of_epoch: int) -> Any:
    """A Spark DataFrame of the published table as of ``as_of_epoch`` (the figures ``read_sealed`` gives
    for epochs first..``as_of_epoch``, read from the Iceberg snapshot instead of the seals' manifests).

    Spark here has no Iceberg runtime, so the snapshot's files are planned by pyiceberg and read by Spark.
    """
    validate_epoch(as_of_epoch)
    table = catalog.load_table(identifier)
    record = h.snapshot_of_epoch(table, as_of_epoch)
    paths = [task.file.file_path for task in table.scan(snapshot_id=record.snapshot_id).plan_files()]
    schema_id = table.snapshot_by_id(record.snapshot_id).schema_id
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
    """The snapshot id that shows the table as of ``epoch``."""
    return h.snapshot_of_epoch(catalog.load_table(identifier), epoch).snapshot_id
