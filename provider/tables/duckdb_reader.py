"""DuckDB reading a published table offline: its Iceberg and Avro extensions come from their pip
packages (``duckdb-extension-iceberg``, ``duckdb-extension-avro``) and are LOADed from there, never
INSTALLed (which would download them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from airflow_epochs.coordination.errors import EpochsError

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


def _quoted(text: str) -> str:
    return text.replace("'", "''")
