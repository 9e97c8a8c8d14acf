"""Waits that may never end are said, and waits that cannot end fail: a missing pipeline (a typo), a
partition the opened epoch does not have, an epoch far past the frontier, a refused identity; and a
trigger applies its sensor's timeout itself (``airflow dags test`` runs it inline and applies none)."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.sensors import FrontierSensor, SealedPartitionSensor
from airflow_epochs.triggers.frontier import FrontierReachedTrigger
from airflow_epochs.triggers.seals import PartitionsSealedTrigger

pytestmark = pytest.mark.integration


@pytest.fixture
def sales(zk, zk_connection) -> EpochLedger:
    ledger = EpochLedger(zk, "sales", owner="etl")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest",), "refunds": ("ingest",)}))
    return ledger


class _Recorder:
    """A task logger's stand-in that keeps its warnings (Airflow's task logger writes past pytest's capture)."""

    def __init__(self, said: list[str]) -> None:
        self.said = said

    def warning(self, message: str, *args: object) -> None:
        self.said.append(message % args)

    def __getattr__(self, _name: str):
        return lambda *args, **kwargs: None


async def _first_event(trigger, timeout):
    events = trigger.run()
    try:
        return await asyncio.wait_for(events.__anext__(), timeout)
    finally:
        await events.aclose()


def test_a_sensor_on_a_missing_pipeline_says_so_at_its_first_check(sales, monkeypatch):
    sensor = SealedPartitionSensor(task_id="wait", pipeline="sale", partitions="orders", epoch=1, mode="poke",
                                   timeout=60)
    said: list[str] = []
    monkeypatch.setattr(type(sensor), "log", _Recorder(said), raising=False)
    assert sensor._check_now() is None
    assert said == ["wait: waiting for partition(s) orders of pipeline 'sale' to be sealed at epoch 1, but pipeline "
                    "'sale' does not exist under /airflow-epochs (pipelines there: sales); a typo in its name waits "
                    "until the timeout (60 s)"]
    assert sensor._check_now() is None  # the next poke, seconds later: not said again yet
    assert len(said) == 1


def test_a_partition_the_opened_epoch_does_not_have_fails_at_once(sales):
    sales.open_epoch(1)
    typo = SealedPartitionSensor(task_id="wait", pipeline="sales", partitions=["orders", "refund"], epoch=1,
                                 mode="poke", timeout=3600)
    started = time.monotonic()
    with pytest.raises(AirflowFailException, match=r"pipeline 'sales' has no partition 'refund' at epoch 1; its "
                       r"partitions there: orders, refunds \(the epoch is opened"):
        typo._check_now()
    assert time.monotonic() - started < 30
    # an epoch not opened yet: a later configuration may add it, so it is said and the wait goes on
    later = SealedPartitionSensor(task_id="later", pipeline="sales", partitions="refund", epoch=5, mode="poke")
    assert later._check_now() is None
    assert later.diagnose(sales).endswith("a configuration version from a later epoch may still add it, so the "
                                          "wait goes on")
    assert SealedPartitionSensor(task_id="ok", pipeline="sales", partitions="orders", epoch=1).diagnose(sales) \
        is None


def test_a_trigger_says_what_it_waits_for_and_applies_the_sensor_timeout(sales, caplog):
    trigger = PartitionsSealedTrigger(pipeline="sale", epoch=1, partitions=["orders"], timeout_at=time.time() + 1.5)
    assert trigger.serialize()[1]["timeout_at"] == trigger.timeout_at  # it survives the trip to the triggerer
    with caplog.at_level(logging.WARNING):
        event = asyncio.run(_first_event(trigger, 30))
    assert event.payload["status"] == "timeout"
    assert any("still waiting for partition(s) orders of pipeline 'sale' at epoch 1: pipeline 'sale' does not "
               "exist under /airflow-epochs (pipelines there: sales)" in r.getMessage() for r in caplog.records)


def test_an_epoch_far_past_the_frontier_is_said_after_the_first_look(sales, caplog):
    """The opening of epoch 10 at frontier 0 waits for epoch 9: said from the second look on (catch-up runs
    wait a few epochs ahead as a matter of course), then every notice_every seconds."""
    trigger = FrontierReachedTrigger(pipeline="sales", epoch=9, timeout_at=time.time() + 2.5)
    trigger.notice_every = 1.0
    with caplog.at_level(logging.WARNING):
        event = asyncio.run(_first_event(trigger, 30))
    assert event.payload["status"] == "timeout"
    said = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    assert said and said[0] == ("still waiting for the frontier of pipeline 'sales' to reach epoch 9: the "
                                "pipeline's frontier is at epoch 0, 9 epochs before epoch 9")


def test_a_refused_identity_names_the_connection_and_the_user(zk_server, zk_chroot, monkeypatch):
    owner = zk_server.settings(zk_chroot, login="etl", password="pw-owner", use_acl=True).start_client()
    try:
        EpochLedger(owner, "guarded", owner="etl").create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    finally:
        owner.stop()
        owner.close()
    monkeypatch.setenv("AIRFLOW_CONN_ZK_WRONG", json.dumps(
        zk_server.connection(zk_chroot, login="etl", password="not-the-password")))
    sensor = FrontierSensor(task_id="gate", pipeline="guarded", epoch=1, zookeeper_conn_id="zk_wrong", mode="poke")
    with pytest.raises(AirflowFailException, match=r"ZooKeeper refused digest user 'etl' of connection 'zk_wrong' "
                       r"\(NoAuth\)"):
        sensor._check_now()
    # in the triggerer: the same names, in the event the deferred task fails with
    event = asyncio.run(_first_event(FrontierReachedTrigger(pipeline="guarded", epoch=1, zookeeper_conn_id="zk_wrong"),
                                     30))
    assert event.payload["status"] == "error"
    assert "ZooKeeper refused a read (NoAuth) to connection 'zk_wrong' (digest user 'etl')" in event.payload["reason"]
