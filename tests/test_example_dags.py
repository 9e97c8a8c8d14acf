"""Example DAGs load and run for real (dag.test) against a real ZooKeeper."""

from __future__ import annotations

import threading
import time

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = pytest.mark.integration


def test_every_dag_file_loads(dagbag):
    assert "example_epoch_smoke" in dagbag.dags
    for dag in dagbag.dags.values():
        assert dag.tasks, dag.dag_id


def test_smoke_dag_opens_votes_and_seals_epochs_in_zookeeper(dagbag, zk_connection, zk):
    dag = dagbag.get_dag("example_epoch_smoke")
    for epoch in (1, 2):
        run = dag.test(run_conf={"epoch": epoch})
        assert "success" in str(run.state)
    ledger = EpochLedger(zk, "smoke")
    assert ledger.frontier() == 2
    seal = ledger.seal(2, "flights")
    assert seal is not None and seal.manifests["ingest_flights"]["rows"] == "200"
    events = [(e.event, e.detail.get("epoch")) for e in ledger.history()]
    assert events.index(("epoch_sealed", 1)) < events.index(("epoch_opened", 2))


def test_out_of_order_epoch_fails_the_run_and_writes_nothing(dagbag, zk_connection, zk):
    dag = dagbag.get_dag("example_epoch_smoke")
    assert "success" in str(dag.test(run_conf={"epoch": 1}).state)
    before = tree(zk)
    run = dag.test(run_conf={"epoch": 3})  # epoch 2 is not sealed
    assert "failed" in str(run.state)
    assert tree(zk) == before


def test_frontier_sensor_waits_for_the_seal(dagbag, zk_connection, zk):
    """The consumer DAG (one deferred and one poking sensor) finishes only after a seal that another
    process-like actor (here a thread using the core directly, as a Spark driver would) writes."""
    consumer = dagbag.get_dag("test_wait_for_frontier")
    ledger = EpochLedger(zk, "upstream", owner="producer")
    ledger.create_pipeline(PipelineConfig({"flights": ("ingest",)}))
    sealed_at: list[float] = []

    def produce_later():
        time.sleep(3)
        attempt = ledger.open_epoch(1)
        ledger.vote(attempt, "flights", "ingest", {"rows": 1})
        sealed_at.append(time.monotonic())

    producer = threading.Thread(target=produce_later)
    started = time.monotonic()
    producer.start()
    run = consumer.test(run_conf={"pipeline": "upstream", "epoch": 1})
    finished = time.monotonic()
    producer.join()
    assert "success" in str(run.state)
    assert sealed_at and finished >= sealed_at[0]  # never before the seal
    assert finished - started >= 3
