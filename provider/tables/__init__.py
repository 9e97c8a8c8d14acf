"""Sealed partitions as Apache Iceberg tables: publish on seal, exactly once, and read as of an epoch.

Needs the ``tables`` extra (pyiceberg). See :mod:`airflow_epochs.tables.publish`. The package's names are
imported on first use, so that the connection type's hook (:mod:`airflow_epochs.tables.hook`), which
Airflow imports to list connection types, imports without the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module of this package it lives in
_EXPORTS: dict[str, str] = {
    "CatalogSettings": "airflow_epochs.tables.catalog",
    "EpochNotPublished": "airflow_epochs.tables.history",
    "IncompatibleSchema": "airflow_epochs.tables.columns",
    "NoSnapshotOfItsOwn": "airflow_epochs.tables.history",
    "NotAlignedCut": "airflow_epochs.tables.cut",
    "PublishOutcome": "airflow_epochs.tables.publish",
    "PublishRefused": "airflow_epochs.tables.seal_files",
    "PublishedPartition": "airflow_epochs.tables.published",
    "PublishedSnapshot": "airflow_epochs.tables.history",
    "Publisher": "airflow_epochs.tables.publish",
    "ResealPublisher": "airflow_epochs.tables.reseal_publish",
    "RolledBackWhilePublishing": "airflow_epochs.tables.publish",
    "RunOutsideStorage": "airflow_epochs.tables.run_folders",
    "SealedCut": "airflow_epochs.tables.cut",
    "TableBroken": "airflow_epochs.tables.integrity",
    "TableOfAnotherPartition": "airflow_epochs.tables.history",
    "TableProblem": "airflow_epochs.tables.integrity",
    "as_of_files": "airflow_epochs.tables.read",
    "catalog_settings": "airflow_epochs.tables.catalog",
    "epochs_in": "airflow_epochs.tables.read",
    "load_catalog": "airflow_epochs.tables.catalog",
    "mirror_rollback": "airflow_epochs.tables.publish",
    "publish_sealed": "airflow_epochs.tables.publish",
    "published_snapshot": "airflow_epochs.tables.published",
    "read_sealed_as_of": "airflow_epochs.tables.read",
    "read_sealed_cut": "airflow_epochs.tables.cut",
    "settings_from_connection": "airflow_epochs.tables.catalog",
    "snapshot_id_of_epoch": "airflow_epochs.tables.read",
    "table_as_of_epoch": "airflow_epochs.tables.read",
    "table_problems": "airflow_epochs.tables.integrity",
}

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
