"""Reading sealed partitions published as Iceberg tables: time travel by epoch, one consistent cut
across tables, and DuckDB offline. Included by docs/guides/iceberg.rst; tests/integration/test_docs_examples.py
publishes real sealed epochs into ``lake.daily`` and ``lake.weekly`` and calls each function."""

from __future__ import annotations

from typing import Any


def as_of_epoch(spark: Any, epoch: int) -> tuple[Any, Any]:
    # [START iceberg_as_of_epoch]
    from airflow_epochs.tables import load_catalog, read_sealed_as_of, settings_from_connection, table_as_of_epoch

    catalog = load_catalog(settings_from_connection("iceberg_default"))
    rows = table_as_of_epoch(catalog, "lake.daily", epoch)          # pyarrow.Table: epochs 1..epoch
    frame = read_sealed_as_of(spark, catalog, "lake.daily", epoch)  # the same as a Spark DataFrame
    # [END iceberg_as_of_epoch]
    return rows, frame


def consistent_cut(catalog: Any, epoch: int) -> tuple[Any, Any, Any]:
    # [START iceberg_cut]
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook
    from airflow_epochs.tables import read_sealed_cut

    with ZooKeeperHook("zookeeper_default") as zookeeper:  # the seals are read through its ledgers
        cut = read_sealed_cut(zookeeper.ledger, catalog, ["lake.daily", "lake.weekly"], epoch)
    daily, weekly = cut.rows["lake.daily"], cut.rows["lake.weekly"]  # pyarrow.Tables; cut.members: the snapshots
    # [END iceberg_cut]
    return cut, daily, weekly


def duckdb_at_epoch(catalog: Any, epoch: int) -> tuple[Any, Any]:
    # [START iceberg_duckdb]
    from airflow_epochs.tables.duckdb_reader import as_of_sql, connect, scan_sql

    table = catalog.load_table("lake.daily")
    duck = connect()  # LOADs the Avro and Iceberg extensions from their packages' files: nothing is downloaded
    scan = scan_sql(table.metadata_location)  # iceberg_scan('<metadata file>'), the location quoted
    totals = duck.sql(f"SELECT key, sum(amount) AS amount FROM {scan} GROUP BY key")  # noqa: S608
    at_epoch, _ = as_of_sql(catalog, "lake.daily", epoch)  # the epoch's snapshot, or its files after a re-seal
    as_of = duck.sql(f"SELECT * FROM {at_epoch}")  # noqa: S608 - the table as of the epoch
    # [END iceberg_duckdb]
    return totals.df(), as_of.df()
