"""Which Iceberg table and snapshot show a sealed partition at an epoch (for the Epochs page).

A table we publish into carries ``epochs.pipeline`` and ``epochs.partition`` in its properties, so the
tables of a partition are found in a catalog without any record in ZooKeeper; the snapshot of an epoch
is the live publish of it in the table's history (:func:`airflow_epochs.tables.history.snapshot_of_epoch`).

The page looks in the catalogs of the Iceberg connections named by ``$AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS``
(comma-separated; none by default: no catalog is contacted).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.names import validate_epoch, validate_name
from airflow_epochs.tables import history as h

log = logging.getLogger(__name__)

TABLE_CONN_IDS_ENV = "AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS"
TABLES_TTL_S = 60.0  # how long a catalog's list of our tables is reused before it is listed again


@dataclass(frozen=True)
class PublishedPartition:
    """A sealed partition at an epoch as a table shows it: the table and the snapshot of that epoch."""

    catalog: str
    table: str
    epoch: int
    snapshot_id: int
    attempt: int
    request: str

    def to_dict(self) -> dict[str, Any]:
        return {"catalog": self.catalog, "table": self.table, "epoch": self.epoch, "snapshot_id": self.snapshot_id,
                "attempt": self.attempt, "request": self.request}


def _lookup_errors() -> tuple[type[BaseException], ...]:
    """What a catalog that cannot be read raises (the page then shows no table, and says so in the log)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, RESTError

    # RESTError: a REST catalog's refusals and outages (401, 403, 5xx, an expired token) are their own family
    errors: list[type[BaseException]] = [OSError, ValueError, NoSuchTableError, NoSuchNamespaceError, RESTError]
    try:
        from sqlalchemy.exc import SQLAlchemyError

        errors.append(SQLAlchemyError)
    except ImportError:  # a REST catalog only: no SQL
        pass
    return tuple(errors)


def tables_of(catalog: Any) -> dict[tuple[str, str], list[str]]:
    """(pipeline, partition) -> the tables of the catalog that publish it (by their properties)."""
    found: dict[tuple[str, str], list[str]] = {}
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            name = ".".join(identifier)
            properties = catalog.load_table(name).properties
            pipeline, partition = properties.get(h.PIPELINE), properties.get(h.PARTITION)
            if pipeline and partition:
                found.setdefault((pipeline, partition), []).append(name)
    return found


def published_snapshot(catalog: Any, table: str, pipeline: str, partition: str, epoch: int, *,
                       catalog_name: str = "") -> PublishedPartition | None:
    """The snapshot of ``table`` that shows ``partition`` of ``pipeline`` as of ``epoch``, or None when
    that epoch is not live in the table (not published yet, or rolled back) or the table is another's."""
    validate_name("pipeline", pipeline)
    validate_name("partition", partition)
    validate_epoch(epoch)
    record = h.live_epochs(catalog.load_table(table)).get(epoch)
    if record is None or (record.pipeline, record.partition) != (pipeline, partition):
        return None
    return PublishedPartition(catalog_name, table, epoch, record.snapshot_id, record.attempt, record.request)


class PublishedIndex:
    """The page's view of the catalogs: for a sealed partition at an epoch, the tables and snapshots
    that show it. Catalogs are loaded on first use; each catalog's list of our tables is kept for
    :data:`TABLES_TTL_S` seconds (a new table shows up after that)."""

    def __init__(self, catalogs: Mapping[str, Callable[[], Any]], *, ttl: float = TABLES_TTL_S) -> None:
        """:param catalogs: catalog name -> a function returning the pyiceberg catalog."""
        self._factories = dict(catalogs)
        self._catalogs: MutableMapping[str, Any] = {}
        self._tables: dict[str, tuple[float, dict[tuple[str, str], list[str]]]] = {}
        self._ttl = ttl
        self._lock = threading.Lock()

    @classmethod
    def from_connections(cls, conn_ids: Sequence[str]) -> PublishedIndex:
        """An index of the catalogs of these Airflow connections (type ``iceberg``)."""
        from airflow_epochs.tables.catalog import load_catalog, settings_from_connection

        def loader(conn_id: str) -> Callable[[], Any]:
            return lambda: load_catalog(settings_from_connection(conn_id))

        return cls({conn_id: loader(conn_id) for conn_id in conn_ids})

    @classmethod
    def from_environment(cls) -> PublishedIndex:
        """The index of the connections named by ``$AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS`` (possibly none)."""
        conn_ids = [c.strip() for c in os.environ.get(TABLE_CONN_IDS_ENV, "").split(",") if c.strip()]
        return cls.from_connections(conn_ids)

    def _catalog(self, name: str) -> Any:
        with self._lock:
            if name not in self._catalogs:
                self._catalogs[name] = self._factories[name]()
            return self._catalogs[name]

    def _tables_in(self, name: str) -> dict[tuple[str, str], list[str]]:
        now = time.monotonic()
        with self._lock:
            cached = self._tables.get(name)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        found = tables_of(self._catalog(name))
        with self._lock:
            self._tables[name] = (now, found)
        return found

    def lookup(self, pipeline: str, partition: str, epoch: int) -> list[PublishedPartition]:
        """Every table (of every catalog) that shows ``partition`` of ``pipeline`` as of ``epoch``."""
        if not self._factories:
            return []
        errors = _lookup_errors()
        found = []
        for name in sorted(self._factories):
            try:
                for table in self._tables_in(name).get((pipeline, partition), []):
                    record = published_snapshot(self._catalog(name), table, pipeline, partition, epoch,
                                                catalog_name=name)
                    if record is not None:
                        found.append(record)
            except errors as exc:
                # The first line of the driver's own message: SQLAlchemy's adds the statement and parameters.
                reason = next(iter(str(getattr(exc, "orig", None) or exc).splitlines()), "")
                log.warning("Epochs page: catalog %s cannot say which table shows %s/%s: %s: %s", name, pipeline,
                            partition, type(exc).__name__, reason)
        return found

    def annotate(self, pipeline: str, epoch: int, detail: dict[str, Any]) -> dict[str, Any]:
        """Add ``published`` (a list of :meth:`PublishedPartition.to_dict`) to each sealed partition of an
        epoch detail's JSON (``EpochDetail`` as the page's API gives it)."""
        for part in detail.get("partitions", []):
            part["published"] = [p.to_dict() for p in self.lookup(pipeline, part["partition"], epoch)] \
                if part.get("state") == "sealed" else []
        return detail
