"""The leader-aware open decision, without Airflow, on a real ZooKeeper."""

from __future__ import annotations

import datetime
import time

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig, open_as_leader

pytestmark = pytest.mark.integration
SHORT = datetime.timedelta(seconds=2)


def test_every_branch_of_the_decision(zk_factory):
    a = EpochLedger(zk_factory(), "coord", owner="deploy-a")
    b = EpochLedger(zk_factory(), "coord", owner="deploy-b")
    a.create_pipeline(PipelineConfig({"out": ("job",)}))

    waiting = open_as_leader(b, 2, lease_duration=SHORT)
    assert (waiting.action, waiting.wait_for_frontier, waiting.wait_seconds) == ("wait", 1, None)

    opened = open_as_leader(a, 1, lease_duration=SHORT)
    assert opened.action == "opened" and opened.attempt.owner == "deploy-a" and opened.took_over is None
    standby = open_as_leader(b, 1, lease_duration=SHORT)
    assert (standby.action, standby.wait_for_frontier, standby.leader) == ("wait", 1, "deploy-a")
    assert 1.0 <= standby.wait_seconds <= 4.0

    time.sleep(standby.wait_seconds + 0.5)  # deploy-a stops renewing: its lease runs out
    takeover = open_as_leader(b, 1, lease_duration=SHORT)
    assert takeover.action == "opened" and takeover.took_over.owner == "deploy-a"
    assert takeover.attempt.token == opened.attempt.token + 1
    b.vote(takeover.attempt, "out", "job", {"rows": 1}, snapshot="totals@1")

    sealed = open_as_leader(a, 1, lease_duration=SHORT)
    assert sealed.action == "sealed" and sealed.sealed.owner == "deploy-b"
    second = open_as_leader(b, 2, lease_duration=SHORT)
    assert second.action == "opened" and second.snapshots["out"]["job"].pointer == "totals@1"
    assert EpochLedger(a.client, "coord", owner="deploy-a").lease().holder().owner == "deploy-b"


def test_a_pipeline_starting_at_a_later_epoch_opens_it_first_and_hands_the_next_its_snapshot(zk_factory):
    ledger = EpochLedger(zk_factory(), "coord-late", owner="deploy-a")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}), first_epoch=17)
    assert open_as_leader(ledger, 18, lease_duration=SHORT).wait_for_frontier == 17
    first = open_as_leader(ledger, 17, lease_duration=SHORT)
    assert (first.action, first.snapshots) == ("opened", {})  # nothing was sealed before the first epoch
    ledger.vote(first.attempt, "out", "job", {"rows": 1}, snapshot="totals@17")
    nxt = open_as_leader(ledger, 18, lease_duration=SHORT)
    assert nxt.action == "opened" and nxt.snapshots["out"]["job"].pointer == "totals@17"
    assert ledger.lease().holder().owner == "deploy-a"  # the lease the coordinator took, through the handle
