"""The columns of sealed Parquet files against an Iceberg table's: the union schema, compatibility
(evolution by name, lossless widenings), and whether the files can be registered as they are."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from airflow_epochs.coordination.base.errors import EpochsError
from airflow_epochs.spark.storage import filesystem

# Lossless type widenings Iceberg allows in place (schema evolution by name).
PROMOTIONS = frozenset({(pa.int32(), pa.int64()), (pa.float32(), pa.float64())})


class IncompatibleSchema(EpochsError):
    """A sealed output's column does not fit the table's column of that name; nothing was committed."""


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
        if same_type(have, f.type) or (have, f.type) in PROMOTIONS or (f.type, have) in PROMOTIONS:
            continue
        raise IncompatibleSchema(f"{where}: column {f.name!r} is {f.type} in the sealed files but {have} in the "
                                 f"table; nothing was committed")
    return added


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether two Arrow types are one Iceberg type (string/large string, timestamps of one zone-ness)."""
    if a == b:
        return True
    strings = (pa.string(), pa.large_string())
    binaries = (pa.binary(), pa.large_binary())
    if (a in strings and b in strings) or (a in binaries and b in binaries):
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return bool(a.tz) == bool(b.tz)
    return False


def registrable(schema: pa.Schema) -> bool:
    """Whether ``add_files`` can take files of this schema as they are: no Iceberg field ids in them
    (ours come from the table's name mapping) and no nanosecond timestamps (Spark's INT96)."""
    for f in schema:
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            return False
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            return False
    return True


def readable(files: Iterable[str], target: pa.Schema) -> pa.Table:
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


def arrow_for_iceberg(schema: pa.Schema) -> pa.Schema:
    """``schema`` as the table takes it: every column nullable, nanosecond timestamps as microseconds."""
    fields = []
    for f in schema:
        kind = f.type
        if pa.types.is_timestamp(kind) and kind.unit == "ns":
            kind = pa.timestamp("us", tz=kind.tz)
        fields.append(pa.field(f.name, kind, nullable=True))
    return pa.schema(fields)
