"""The opening of an epoch from a task (hooks/epoch_opening), on a real ZooKeeper: without waiting in
the worker the first decision comes back for the caller to defer on; waiting in the worker, it
returns only once the epoch is opened, woken by the seal of the previous epoch."""

from __future__ import annotations

import datetime
import threading
import time

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.hooks.epoch_opening import describe_wait, open_epoch

LEASE = datetime.timedelta(seconds=30)


def test_a_deferring_caller_gets_the_wait_and_a_waiting_one_the_opened_epoch(zk):
    ledger = EpochLedger(zk, "opening", owner="deploy-a")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    first = ledger.open_epoch(1)

    decision = open_epoch(ledger, 2, lease_duration=LEASE, request_id="r-2", wait_in_worker=False)
    assert (decision.action, decision.wait_for_frontier) == ("wait", 1)
    assert describe_wait(decision) == "epoch 2 waits for epoch 1 to be sealed"
    assert ledger.epoch_info(2) is None  # nothing written while it waits

    sealed_at: list[float] = []

    def seal_epoch_1_later() -> None:
        time.sleep(1.0)
        EpochLedger(zk, "opening", owner="deploy-a").vote(first, "out", "job", {"rows": 1})
        sealed_at.append(time.monotonic())

    sealer = threading.Thread(target=seal_epoch_1_later)
    sealer.start()
    decision = open_epoch(ledger, 2, lease_duration=LEASE, request_id="r-2", wait_in_worker=True)
    opened_at = time.monotonic()
    sealer.join()
    assert decision.action == "opened" and decision.attempt is not None and decision.attempt.epoch == 2
    assert sealed_at and opened_at >= sealed_at[0]  # it opened only after the seal, on the frontier's watch
    # the same request again finds the attempt it opened
    again = open_epoch(ledger, 2, lease_duration=LEASE, request_id="r-2", wait_in_worker=False)
    assert again.action == "opened" and again.attempt is not None
    assert again.attempt.token == decision.attempt.token


def test_a_sealed_epoch_is_reported_not_reopened(zk):
    ledger = EpochLedger(zk, "opening_sealed", owner="deploy-a")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "out", "job", {"rows": 1})
    for wait_in_worker in (False, True):
        decision = open_epoch(ledger, 1, lease_duration=LEASE, request_id="r-1", wait_in_worker=wait_in_worker)
        assert decision.action == "sealed" and decision.sealed is not None
        assert decision.sealed.attempt == attempt.token
