"""One partition, one OpenLineage dataset, whichever task names it: the producer's output, a reader's
input (``sealed_inputs``) and ``PublishSealedOperator``'s input. Real ZooKeeper, no Spark: the seals are
voted here as a producer votes them (with or without the table it publishes into)."""

from __future__ import annotations

import json
import types

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.lineage.facets import partition_dataset_id
from airflow_epochs.lineage.operators import publish_task_lineage, spark_task_lineage
from airflow_epochs.spark.storage import run_location

pytestmark = [pytest.mark.integration]
STORAGE = "/lake"
TABLE_ID = ("iceberg://lake_catalog", "epochs.daily")


@pytest.fixture
def iceberg_connection(monkeypatch):
    extra = {"catalog": "sql", "sqlite": "/nonexistent/tables/catalog.db", "warehouse": "file:///nonexistent/tables/wh",
             "name": "lake_catalog"}
    monkeypatch.setenv("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS", "/nonexistent/tables")  # never opened: names only
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_LAKE", json.dumps({"conn_type": "iceberg", "extra": extra}))
    return "iceberg_lake"


def _sealed(zk, name: str, *, declared: bool):
    ledger = EpochLedger(zk, name, owner="tests")
    ledger.create_pipeline(PipelineConfig({"daily": ("clean",), "report": ("reader",)}), first_epoch=1)
    attempt = ledger.open_epoch(1)
    location = run_location(STORAGE, name, "daily", 1, attempt.token, "r1")
    manifest = {"epoch": 1, "attempt": attempt.token, "run": "r1", "location": location,
                "outputs": {"data": {"path": f"{location}/data", "format": "parquet", "rows": 2, "files": 1}}}
    if declared:  # what SparkEpochOperator(table=...) votes
        manifest["lineage_dataset"] = {"namespace": TABLE_ID[0], "name": TABLE_ID[1]}
    assert ledger.vote(attempt, "daily", "clean", manifest).partition_sealed
    return ledger, attempt


def _ids(datasets) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _operators(attempt, conn_id: str, *, producer_table: str | None):
    producer = types.SimpleNamespace(storage=STORAGE, partition="daily", producer="clean", sealed_inputs={},
                                     table=producer_table, table_conn_id=conn_id, zookeeper_conn_id="zookeeper_default",
                                     root="/airflow-epochs", epoch_attempt=attempt, published=None)
    reader = types.SimpleNamespace(storage=STORAGE, partition="report", producer="reader",
                                   sealed_inputs={"daily": "daily"}, table=None, zookeeper_conn_id="zookeeper_default",
                                   root="/airflow-epochs", epoch_attempt=attempt, published=None)
    publish = types.SimpleNamespace(partition="daily", table="epochs.daily", table_conn_id=conn_id, storage=None,
                                    zookeeper_conn_id="zookeeper_default", root="/airflow-epochs",
                                    published={"epoch": 1, "pipeline": attempt.pipeline, "published": [],
                                               "already": []})
    return producer, reader, publish


def test_a_published_partition_is_its_table_for_producer_reader_and_publisher(zk, zk_connection, iceberg_connection):
    ledger, attempt = _sealed(zk, "declared", declared=True)
    producer, reader, publish = _operators(attempt, iceberg_connection, producer_table="epochs.daily")
    assert _ids(spark_task_lineage(producer, complete=True).outputs) == [TABLE_ID]
    assert _ids(spark_task_lineage(reader, complete=True).inputs) == [TABLE_ID]
    published = publish_task_lineage(publish, complete=True)
    assert _ids(published.inputs) == [TABLE_ID] and _ids(published.outputs) == [TABLE_ID]
    assert published.inputs[0].inputFacets["subset"].inputCondition.partitions[0].identifier == "1"
    assert partition_dataset_id(ledger, "daily", 1) == TABLE_ID


def test_an_unpublished_partition_is_its_storage_location_and_a_publish_task_maps_it_to_the_table(
        zk, zk_connection, iceberg_connection):
    ledger, attempt = _sealed(zk, "plain", declared=False)
    producer, reader, publish = _operators(attempt, iceberg_connection, producer_table=None)
    where = ("file", "/lake/plain/daily")
    assert _ids(spark_task_lineage(producer, complete=True).outputs) == [where]
    assert _ids(spark_task_lineage(reader, complete=True).inputs) == [where]
    published = publish_task_lineage(publish, complete=True)  # no storage given: from the seal's manifests
    assert _ids(published.inputs) == [where] and _ids(published.outputs) == [TABLE_ID]
    assert partition_dataset_id(ledger, "daily", 1) == where
    assert partition_dataset_id(ledger, "report", 1) is None  # not sealed, no storage given: unknown
