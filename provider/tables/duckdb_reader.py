"""DuckDB reading a published table offline: its Iceberg and Avro extensions come from their pip
packages (``duckdb-extension-iceberg``, ``duckdb-extension-avro``) and are LOADed from there, never
INSTALLed (which would download them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from airflow_epochs.coordination.base.errors import EpochsError

EXTENSIONS = ("avro", "iceberg")  # avro first: iceberg reads its manifests through it


class ExtensionMissing(EpochsError):
    """A DuckDB extension package is not installed (install the ``duckdb`` extra)."""


def extension_file(name: str) -> Path:
    """The ``<name>.duckdb_extension`` file shipped by the ``duckdb-extension-<name>`` package, for the
    installed duckdb's version."""
    import duckdb

    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionMissing(f"the package duckdb-extension-{name} is not installed")
    base = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    version = f"v{duckdb.__version__}"
    wanted = base / version / f"{name}.duckdb_extension"
    if wanted.is_file():
        return wanted
    found = sorted(base.glob(f"*/{name}.duckdb_extension"))
    if not found:
        raise ExtensionMissing(f"duckdb-extension-{name} ships no {name}.duckdb_extension under {base}")
    return found[-1]


def connect(database: str = ":memory:") -> Any:
    """A DuckDB connection with the Iceberg extension loaded from its package (no download)."""
    import duckdb

    conn = duckdb.connect(database, config={"autoinstall_known_extensions": "false",
                                            "autoload_known_extensions": "false"})
    for name in EXTENSIONS:
        conn.execute(f"LOAD '{_quoted(str(extension_file(name)))}'")  # LOAD takes no parameters
    return conn


def scan_sql(metadata_location: str, snapshot_id: int | None = None) -> str:
    """The table function reading a table's metadata file with DuckDB, at ``snapshot_id`` if given
    (see :func:`airflow_epochs.tables.snapshot_id_of_epoch` for an epoch's)."""
    at = "" if snapshot_id is None else f", snapshot_from_id={int(snapshot_id)}"
    return f"iceberg_scan('{_quoted(metadata_location)}'{at})"


def as_of_sql(catalog: Any, identifier: str, epoch: int) -> tuple[str, str]:
    """The table function reading the table as of ``epoch`` with DuckDB (epochs first..``epoch`` at their
    newest published versions), and what it reads: ``iceberg_scan`` at the epoch's snapshot
    (:func:`~airflow_epochs.tables.snapshot_id_of_epoch`), or, where no snapshot shows that epoch alone
    (a re-seal of an earlier epoch holds later ones too), ``read_parquet`` of the epochs' data files in the
    newest snapshot that holds them.

    :raises EpochNotPublished: that epoch is not in the table.
    """
    from airflow_epochs.tables.history import NoSnapshotOfItsOwn
    from airflow_epochs.tables.read import as_of_files, snapshot_id_of_epoch

    table = catalog.load_table(identifier)
    try:
        snapshot = snapshot_id_of_epoch(catalog, identifier, epoch)
    except NoSnapshotOfItsOwn:
        snapshot, files = as_of_files(catalog, identifier, epoch)
        listed = ", ".join(f"'{_quoted(_local(f))}'" for f in files)
        return f"read_parquet([{listed}], union_by_name = true)", f"{len(files)} data file(s) of snapshot {snapshot}"
    return scan_sql(table.metadata_location, snapshot), f"snapshot {snapshot}"


def _local(location: str) -> str:
    """A ``file:`` URI as a path (DuckDB reads other schemes through its own file systems)."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(location)
    return unquote(parsed.path) if parsed.scheme == "file" else location


def _quoted(text: str) -> str:
    return text.replace("'", "''")


def matches_sealed(ledger: Any, catalog: Any, identifier: str, partition: str, through_epoch: int, *,
                   output: str = "data") -> tuple[bool, str]:
    """Whether DuckDB, reading the published table as of ``through_epoch``, sees exactly the rows the
    seals of epochs first..``through_epoch`` name (read by pyarrow from the manifests' files); and a
    one-line verdict."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from airflow_epochs.spark.sealed import sealed_outputs
    from airflow_epochs.spark.storage import data_files
    table = catalog.load_table(identifier)
    source, snapshot = as_of_sql(catalog, identifier, through_epoch)
    duck = connect()
    try:
        query = f"SELECT * FROM {source}"  # noqa: S608 - quoted by as_of_sql
        seen = duck.execute(query).arrow()
    finally:
        duck.close()
    if isinstance(seen, pa.RecordBatchReader):
        seen = seen.read_all()
    first = min(r.epoch for r in _live(table))
    parts = [pq.read_table(f"{item.path.rstrip('/')}/{name}")
             for item in sealed_outputs(ledger, partition, range(first, through_epoch + 1), output=output)
             for name, _ in data_files(item.path)]
    sealed = pa.concat_tables(parts, promote_options="permissive") if parts else None
    if sealed is None:
        return seen.num_rows == 0, f"DuckDB: {seen.num_rows} rows, the seals name none"
    columns = sorted(set(sealed.column_names) & set(seen.column_names))
    left = seen.select(columns).to_pandas()
    right = sealed.select(columns).to_pandas()
    left = left.sort_values(columns).reset_index(drop=True)
    right = right.sort_values(columns).reset_index(drop=True)
    equal = len(left) == len(right) and bool(left.astype(str).equals(right.astype(str)))
    return equal, (f"DuckDB reads {identifier} as of epoch {through_epoch} ({snapshot}): {len(left)} rows, "
                   f"{'equal to' if equal else 'DIFFERENT from'} the sealed files of epochs {first}..{through_epoch}")


def _live(table: Any) -> list[Any]:
    from airflow_epochs.tables.history import live_epochs

    return list(live_epochs(table).values())


def published_check(ledger: Any, conn_id: str, identifier: str, partition: str, through_epoch: int) -> tuple[bool, str]:
    """:func:`matches_sealed` with the catalog of the Airflow connection ``conn_id`` (the demo's check)."""
    from airflow_epochs.tables.catalog import load_catalog, settings_from_connection

    catalog = load_catalog(settings_from_connection(conn_id))
    return matches_sealed(ledger, catalog, identifier, partition, through_epoch)
