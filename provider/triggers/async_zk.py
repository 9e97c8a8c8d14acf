"""Kept for imports of earlier releases: the asynchronous store moved to the core
(:mod:`airflow_epochs.coordination.base.aio`), and a trigger's ledger comes from its session
(:meth:`airflow_epochs.triggers.lifecycle.TriggerSession.ledger`)."""

from __future__ import annotations

from airflow_epochs.coordination.base.aio import AsyncZooKeeper, Watch

__all__ = ["AsyncZooKeeper", "Watch"]
