"""Kept for imports of earlier releases: the Iceberg catalog's hook lives beside the catalog code now,
:mod:`airflow_epochs.tables.hook`; importing it from here warns."""

from __future__ import annotations

import warnings

from airflow_epochs.tables.hook import IcebergCatalogHook

warnings.warn("airflow_epochs.hooks.iceberg is deprecated: import IcebergCatalogHook from airflow_epochs.tables.hook",
              DeprecationWarning, stacklevel=2)

__all__ = ["IcebergCatalogHook"]
