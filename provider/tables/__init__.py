"""Sealed partitions as Apache Iceberg tables: publish on seal, exactly once, and read as of an epoch.

Needs the ``tables`` extra (pyiceberg). See :mod:`airflow_epochs.tables.publish`.
"""

from __future__ import annotations

from airflow_epochs.tables.catalog import CatalogSettings, catalog_settings, load_catalog, settings_from_connection
from airflow_epochs.tables.columns import IncompatibleSchema
from airflow_epochs.tables.cut import NotAlignedCut, SealedCut, read_sealed_cut
from airflow_epochs.tables.history import (
    EpochNotPublished,
    NoSnapshotOfItsOwn,
    PublishedSnapshot,
    TableOfAnotherPartition,
)
from airflow_epochs.tables.integrity import TableBroken, TableProblem, table_problems
from airflow_epochs.tables.publish import (
    Publisher,
    PublishOutcome,
    RolledBackWhilePublishing,
    mirror_rollback,
    publish_sealed,
)
from airflow_epochs.tables.published import PublishedPartition, published_snapshot
from airflow_epochs.tables.read import (
    as_of_files,
    epochs_in,
    read_sealed_as_of,
    snapshot_id_of_epoch,
    table_as_of_epoch,
)
from airflow_epochs.tables.reseal_publish import ResealPublisher
from airflow_epochs.tables.run_folders import RunOutsideStorage
from airflow_epochs.tables.seal_files import PublishRefused

__all__ = [
    "CatalogSettings", "EpochNotPublished", "IncompatibleSchema", "NoSnapshotOfItsOwn", "NotAlignedCut",
    "PublishOutcome",
    "PublishRefused", "PublishedPartition", "PublishedSnapshot", "Publisher", "ResealPublisher",
    "RolledBackWhilePublishing", "RunOutsideStorage", "SealedCut", "TableBroken", "TableOfAnotherPartition",
    "TableProblem",
    "as_of_files", "catalog_settings", "epochs_in", "load_catalog", "mirror_rollback", "publish_sealed",
    "published_snapshot",
    "read_sealed_as_of", "read_sealed_cut", "settings_from_connection", "snapshot_id_of_epoch", "table_as_of_epoch",
    "table_problems",
]
