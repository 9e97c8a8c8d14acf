"""Which Iceberg table and snapshot show a sealed partition at an epoch (for the Epochs page).

A table we publish into carries ``epochs.pipeline`` and ``epochs.partition`` in its properties, so the
tables of a partition are found in a catalog without any record in ZooKeeper; the snapshot of an epoch
is the live publish of it in the table's history (:func:`airflow_epochs.tables.history.snapshot_of_epoch`).

The page looks in the catalogs of the Iceberg connections named by ``$AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS``
(comma-separated; none by default: no catalog is contacted). An open epoch detail is polled every two
seconds, so the catalog is read once per :data:`TABLES_TTL_S` (its tables and their live snapshots
together), never per poll.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.tables import history as h

log = logging.getLogger(__name__)

TABLE_CONN_IDS_ENV = "AIRFLOW_EPOCHS_UI_TABLE_CONN_IDS"
TABLES_TTL_S = 60.0  # how long a catalog's tables and snapshots are reused before they are read again


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


@dataclass(frozen=True)
class PublishedTable:
    """One table of a catalog that publishes a partition, with its live epochs when it was read."""

    table: str
    pipeline: str
    partition: str
    live: Mapping[int, h.PublishedSnapshot]


def tables_of(catalog: Any) -> dict[tuple[str, str], list[PublishedTable]]:
    """(pipeline, partition) -> the tables of the catalog that publish it (by their properties), each
    with its live epochs (one ``load_table`` per table: the history comes with the table)."""
    found: dict[tuple[str, str], list[PublishedTable]] = {}
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            name = ".".join(identifier)
            table = catalog.load_table(name)
            pipeline, partition = table.properties.get(h.PIPELINE), table.properties.get(h.PARTITION)
            if pipeline and partition:
                found.setdefault((pipeline, partition), []).append(
                    PublishedTable(name, pipeline, partition, h.live_epochs(table)))
    return found


def _shown(catalog_name: str, table: str, pipeline: str, partition: str, epoch: int,
           live: Mapping[int, h.PublishedSnapshot]) -> PublishedPartition | None:
    record = live.get(epoch)
    if record is None or (record.pipeline, record.partition) != (pipeline, partition):
        return None
    return PublishedPartition(catalog_name, table, epoch, record.snapshot_id, record.attempt, record.request)


def published_snapshot(catalog: Any, table: str, pipeline: str, partition: str, epoch: int, *,
                       catalog_name: str = "") -> PublishedPartition | None:
    """The snapshot of ``table`` that shows ``partition`` of ``pipeline`` as of ``epoch``, or None when
    that epoch is not live in the table (not published yet, or rolled back) or the table is another's."""
    validate_name("pipeline", pipeline)
    validate_name("partition", partition)
    validate_epoch(epoch)
    return _shown(catalog_name, table, pipeline, partition, epoch, h.live_epochs(catalog.load_table(table)))


class PublishedIndex:
    """The page's view of the catalogs: for a sealed partition at an epoch, the tables and snapshots
    that show it. Catalogs are loaded on first use; each catalog's tables, with their live snapshots,
    are read once and kept for :data:`TABLES_TTL_S` seconds (a new table or a new publish shows up after
    that), so however often the page polls, a catalog is read at most once per ``ttl``."""

    def __init__(self, catalogs: Mapping[str, Callable[[], Any]], *, ttl: float = TABLES_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """:param catalogs: catalog name -> a function returning the pyiceberg catalog.
        :param ttl: seconds a catalog's tables and snapshots are reused.
        :param clock: the monotonic clock the ``ttl`` is measured on."""
        self._factories = dict(catalogs)
        self._catalogs: MutableMapping[str, Any] = {}
        self._tables: dict[str, tuple[float, dict[tuple[str, str], list[PublishedTable]]]] = {}
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        # one reader per catalog: polls that find its tables expired wait for the one read, not each read it
        self._reading = {name: threading.Lock() for name in self._factories}

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

    def _fresh(self, name: str) -> dict[tuple[str, str], list[PublishedTable]] | None:
        with self._lock:
            cached = self._tables.get(name)
        return cached[1] if cached is not None and self._clock() - cached[0] < self._ttl else None

    def _tables_in(self, name: str) -> dict[tuple[str, str], list[PublishedTable]]:
        found = self._fresh(name)
        if found is not None:
            return found
        with self._reading[name]:
            found = self._fresh(name)  # another poll read it while this one waited
            if found is not None:
                return found
            now = self._clock()
            try:
                found = tables_of(self._catalog(name))
            except _lookup_errors():
                # a catalog that cannot be read is asked again after ``ttl``, not on every poll meanwhile
                with self._lock:
                    stale = self._tables.get(name)
                    self._tables[name] = (now, {} if stale is None else stale[1])
                raise
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
                    record = _shown(name, table.table, pipeline, partition, epoch, table.live)
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
