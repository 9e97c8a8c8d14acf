"""Seals written outside Airflow become asset events through an AssetWatcher: the watcher's trigger
runs in the triggerer and emits one event per sealed epoch of partition ``daily`` of ``watched``."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_epochs.triggers.assets import SealedPartitionEventTrigger

SEALS = Asset(name="epochs.watched.daily", uri="epochs://watched/daily", watchers=[
    AssetWatcher(name="watched_daily_seals",
                 trigger=SealedPartitionEventTrigger(pipeline="watched", partition="daily", scope="stack")),
])

with DAG(dag_id="watched_consumer", schedule=[SEALS], start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         catchup=False, tags=["airflow-epochs", "test"]):

    @task
    def consume(triggering_asset_events=None) -> list[int]:
        return sorted(event.extra["payload"]["epoch"] for events in triggering_asset_events.values()
                      for event in events)

    consume()
