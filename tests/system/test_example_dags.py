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


def test_out_of_order_epoch_waits_for_its_predecessor_and_writes_nothing_meanwhile(dagbag, zk_connection, zk):
    dag = dagbag.get_dag("example_epoch_smoke")
    assert "success" in str(dag.test(run_conf={"epoch": 1}).state)
    before = tree(zk)
    unchanged_while_waiting: list[bool] = []

    def seal_epoch_2_later():
        time.sleep(2)
        unchanged_while_waiting.append(tree(zk) == before)  # epoch 3's run is waiting
        ledger = EpochLedger(zk, "smoke", owner="elsewhere")
        attempt = ledger.open_epoch(2)
        ledger.vote(attempt, "flights", "ingest_flights", {"rows": 2})
        ledger.vote(attempt, "weather", "ingest_weather", {"rows": 2})

    helper = threading.Thread(target=seal_epoch_2_later)
    helper.start()
    run = dag.test(run_conf={"epoch": 3})
    helper.join()
    assert unchanged_while_waiting == [True]
    assert "success" in str(run.state)
    assert EpochLedger(zk, "smoke").frontier() == 3


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


def test_downstream_dags_are_gated_on_the_sealed_partition(dagbag, zk_connection, zk):
    from airflow.sdk import PartitionedAssetTimetable

    from airflow_epochs.operators import partition_asset

    on_asset = dagbag.get_dag("downstream_on_sealed_asset")
    assert isinstance(on_asset.timetable, PartitionedAssetTimetable) \
        or "Partitioned" in type(on_asset.timetable).__name__
    assert partition_asset("flights_daily", "daily").uri == "epochs://flights_daily/daily"

    sensor_dag = dagbag.get_dag("downstream_with_sensor")
    ledger = EpochLedger(zk, "flights_daily", owner="upstream")
    ledger.create_pipeline(PipelineConfig({"daily": ("join",)}))
    done: list[float] = []

    def seal_later():
        time.sleep(2)
        ledger.vote(ledger.open_epoch(1), "daily", "join", {"rows": 1})
        done.append(time.monotonic())

    helper = threading.Thread(target=seal_later)
    helper.start()
    from datetime import datetime, timezone

    run = sensor_dag.test(logical_date=datetime(2013, 1, 1, tzinfo=timezone.utc))
    finished = time.monotonic()
    helper.join()
    assert "success" in str(run.state)
    assert done and finished >= done[0]


def test_the_first_pipeline_of_your_own_seals_with_two_producers_and_gates_its_report(dagbag, zk_connection, zk):
    """docs/quickstart/first_pipeline.rst's DAGs: both producers' votes seal ``orders`` together, and the report
    of an epoch runs once its partitions are sealed, with the versions that sealed them."""
    daily, report = dagbag.get_dag("shop_daily"), dagbag.get_dag("shop_report")
    for epoch in (1, 2):
        assert "success" in str(daily.test(run_conf={"epoch": epoch}).state)
    ledger = EpochLedger(zk, "shop")
    assert ledger.frontier() == 2
    orders = ledger.seal(2, "orders")
    assert orders is not None and sorted(orders.manifests) == ["orders_eu", "orders_us"]
    assert {p: m["rows"] for p, m in orders.manifests.items()} == {"orders_eu": 29, "orders_us": 29}
    assert ledger.seal(2, "refunds").manifests["refunds"]["rows"] == 27
    run = report.test(run_conf={"epoch": 2})
    assert "success" in str(run.state)
    ti = next(t for t in run.get_task_instances() if t.task_id == "report")
    assert ti.xcom_pull(task_ids="report") == "orders v1, refunds v1"
