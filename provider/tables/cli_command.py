"""``airflow-epochs table``: read a published Iceberg table as of an epoch, or list its epochs.

::

    airflow-epochs table read epochs.daily --as-of-epoch 40 --conn-id iceberg_default [--format csv|json]
    airflow-epochs table read epochs.daily --as-of-epoch 40 --version 1 ...   # epoch 40 as its version 1 was
    airflow-epochs table epochs epochs.daily --sqlite catalog.db --warehouse file:///data/warehouse
    airflow-epochs table check epochs.daily --conn-id iceberg_default   # whole? (exit 1, with what to do, if not)
    airflow-epochs table cut epochs.daily --with epochs.weekly --as-of-epoch 40 --conn-id iceberg_default \
        --zk-hosts zk1:2181/chroot        # several tables at an aligned epoch: one consistent cut, or refused

The catalog comes from an Airflow connection (``--conn-id``, see :mod:`airflow_epochs.tables.catalog`)
or, for a SQLite catalog, from ``--sqlite`` and ``--warehouse``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from functools import partial
from typing import Any

from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput
from airflow_epochs.hooks.connections import connection_outside_task
from airflow_epochs.tables.catalog import catalog_settings, load_catalog, settings_of_connection
from airflow_epochs.tables.read import epochs_in, snapshot_as_of, table_as_of_epoch
from airflow_epochs.tables.seal_files import check_identifier


def _epoch(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be an epoch number, not {text!r}")
    return int(text)


def _version(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a version number (1, 2, ...), not {text!r}")
    return int(text)


def add_table_command(sub: Any) -> None:
    """Register ``table`` on the CLI's subparsers."""
    table = sub.add_parser("table", help="read a published Iceberg table as of an epoch, or list its epochs")
    table.add_argument("action", choices=["read", "epochs", "cut", "check"])
    table.add_argument("table", metavar="NAMESPACE.TABLE", help="the Iceberg table")
    table.add_argument("--as-of-epoch", type=_epoch, help="read the table as of this epoch (read: required)")
    table.add_argument("--version", type=_version, help="read: epoch N as this version of its seal was published "
                       "(1: the original, before a re-seal replaced it); default: every epoch at its newest version")
    table.add_argument("--conn-id", help="Airflow connection of the Iceberg catalog")
    table.add_argument("--sqlite", help="a SQLite catalog file (instead of --conn-id)")
    table.add_argument("--warehouse", help="the SQLite catalog's warehouse URI")
    table.add_argument("--format", choices=["csv", "json"], default="csv", help="output format (default csv)")
    table.add_argument("--limit", type=_epoch, help="print at most this many rows")
    table.add_argument("--with", dest="with_tables", action="append", default=[], metavar="NAMESPACE.TABLE",
                       help="cut: another table read at the same epoch (repeatable)")
    table.add_argument("--zk-hosts", help="cut: the ZooKeeper connect string (with an optional chroot) the seals "
                                          "are read from")
    table.add_argument("--zookeeper-conn-id", help="cut: an Airflow connection of type zookeeper, instead of "
                                                   "--zk-hosts")
    table.set_defaults(func=run_table_command)


class CatalogError(EpochsError):
    """The catalog could not be reached, or has no such table."""


def run_table_command(args: argparse.Namespace) -> int:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return _run(args)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise CatalogError(f"no table {args.table!r} in the catalog ({type(exc).__name__})") from None
    except SQLAlchemyError as exc:  # the message is one line; SQLAlchemy's may carry the URL: not shown
        raise CatalogError(f"the SQL catalog cannot be used: {type(exc).__name__}: "
                           f"{next(iter(str(getattr(exc, 'orig', '') or '').splitlines()), '')}") from None


def _run(args: argparse.Namespace) -> int:
    check_identifier(args.table)
    if args.version is not None and args.action != "read":
        raise InvalidInput(f"--version is for table read, not table {args.action}")
    if bool(args.conn_id) == bool(args.sqlite):
        raise InvalidInput("give either --conn-id or --sqlite (with --warehouse)")
    if args.conn_id:  # the metadata database too, not only AIRFLOW_CONN_* (as every other command)
        settings = settings_of_connection(connection_outside_task(args.conn_id), args.conn_id)
    else:
        settings = catalog_settings(extra={"catalog": "sql", "sqlite": args.sqlite, "warehouse": args.warehouse or ""})
    catalog = load_catalog(settings)
    if args.action == "epochs":
        for record in epochs_in(catalog, args.table):
            print(json.dumps(record.to_dict()) if args.format == "json" else
                  f"{record.snapshot_id}\t{record.action}\tepoch {record.epoch}\tattempt {record.attempt}\t"
                  f"generation {record.generation}\trequest {record.request}")
        return 0
    if args.action == "check":
        return _check(args.table, catalog)
    if args.as_of_epoch is None:
        raise InvalidInput(f"table {args.action} needs --as-of-epoch N")
    if args.action == "cut":
        return _cut(args, catalog)
    rows = table_as_of_epoch(catalog, args.table, args.as_of_epoch, version=args.version)
    if args.limit is not None:
        rows = rows.slice(0, args.limit)
    snapshot = snapshot_as_of(catalog.load_table(args.table), args.as_of_epoch, args.version)
    which = "" if args.version is None else f" version {args.version}"
    print(f"# {args.table} as of epoch {args.as_of_epoch}{which}: snapshot {snapshot}, {rows.num_rows} rows",
          file=sys.stderr)
    records = rows.to_pylist()
    if args.format == "json":
        for record in records:
            print(json.dumps(record, default=str))
    else:
        writer = csv.writer(sys.stdout)
        writer.writerow(rows.column_names)
        for record in records:
            writer.writerow([record[c] for c in rows.column_names])
    return 0


def _check(identifier: str, catalog: Any) -> int:
    """Print whether the table is whole (each live epoch once, in order, no file twice, a name mapping
    naming every column), and what to do when it is not; 1 when it is not."""
    from airflow_epochs.tables.integrity import table_problems, what_to_do

    problems = table_problems(catalog.load_table(identifier), files=True)
    if not problems:
        print(f"{identifier}: ok (each live epoch once and in order, no data file twice, name mapping complete)")
        return 0
    for problem in problems:
        print(f"{identifier}: BROKEN: {problem.what}")
    print(f"what to do: {what_to_do(identifier, problems)}")
    return 1


def _cut(args: argparse.Namespace, catalog: Any) -> int:
    """Print several tables at one aligned epoch (refused, nothing printed, unless it is one consistent cut)."""
    from airflow_epochs.hooks.ledgers import READER, ledger_on
    from airflow_epochs.tables.cut import read_sealed_cut

    tables = [args.table, *args.with_tables]
    for identifier in tables:
        check_identifier(identifier)
    if bool(args.zk_hosts) == bool(args.zookeeper_conn_id):
        raise InvalidInput("table cut reads the seals from ZooKeeper: give either --zk-hosts or --zookeeper-conn-id")
    if args.zookeeper_conn_id:
        from airflow_epochs.hooks.zookeeper import settings_of

        # the metadata database too, not only AIRFLOW_CONN_* (as every other command)
        settings = settings_of(connection_outside_task(args.zookeeper_conn_id))
    else:
        from airflow_epochs.connection.embedded import with_embedded_credentials
        from airflow_epochs.connection.zookeeper import ZooKeeperSettings

        # the embedded server's own port: its credentials and CA, as every other command uses them
        settings = with_embedded_credentials(ZooKeeperSettings.from_fields(host=args.zk_hosts))
    client = settings.start_client()
    try:
        # the command's own client, outside any task (no hook): its ledgers are built on it here
        cut = read_sealed_cut(partial(ledger_on, client, owner=READER), catalog, tables, args.as_of_epoch)
    finally:
        client.stop()
        client.close()
    for member in cut.members:
        rows = cut.rows[member.table]
        if args.limit is not None:
            rows = rows.slice(0, args.limit)
        print(f"# {member.table} ({member.pipeline}/{member.partition}) as of epoch {cut.epoch}: snapshot "
              f"{member.snapshot_id}, attempt {member.attempt}, {rows.num_rows} rows", file=sys.stderr)
        records = rows.to_pylist()
        if args.format == "json":
            for record in records:
                print(json.dumps({"table": member.table, **record}, default=str))
        else:
            writer = csv.writer(sys.stdout)
            writer.writerow(["table", *rows.column_names])
            for record in records:
                writer.writerow([member.table, *(record[c] for c in rows.column_names)])
    return 0
