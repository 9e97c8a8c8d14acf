"""Backpressure through DAG runs: a producer whose window is 1 does not open an epoch until the
consumer DAG acknowledged the one before; it waits deferred (or blocking), or gives up after its
limit with a message naming the consumer, having opened nothing."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


def _run(dagbag, dag_id: str, epoch: int) -> str:
    return str(dagbag.get_dag(dag_id).test(run_conf={"epoch": epoch}).state)


def _ack_later(ledger: EpochLedger, epoch: int, delay: float, acked_at: list[float]) -> threading.Thread:
    def ack() -> None:
        time.sleep(delay)
        acked_at.append(time.time())
        ledger.consumer("report").acknowledge(epoch)

    thread = threading.Thread(target=ack)
    thread.start()
    return thread


def test_producer_waits_for_the_consumer_dag(dagbag, zk_connection, zk, capfd):
    ledger = EpochLedger(zk, "bp")
    assert "success" in _run(dagbag, "bp_producer", 1)  # no consumer yet: nothing holds it back
    assert "success" in _run(dagbag, "bp_consumer", 1)
    assert [(c.consumer, c.acked) for c in ledger.backpressure().consumers()] == [("report", 1)]
    assert "success" in _run(dagbag, "bp_producer", 2)  # 2 <= 1 + window

    # Epoch 3 needs the consumer at 2: the impatient variants give up and open nothing.
    capfd.readouterr()
    for dag_id in ("bp_producer_impatient", "bp_producer_impatient_blocking"):
        assert "failed" in _run(dagbag, dag_id, 3), dag_id
        out = capfd.readouterr()
        assert "gave up after waiting 2 s for backpressure" in out.out + out.err, dag_id
        assert "waits for consumer 'report', which acknowledged epoch 1" in out.out + out.err, dag_id
    assert ledger.epoch_info(3) is None
    assert not [e for e in ledger.history() if e.event == "epoch_opened" and e.detail["epoch"] == 3]

    # The patient variants open as soon as the consumer catches up: deferred, then blocking.
    for epoch, dag_id in ((3, "bp_producer"), (4, "bp_producer_blocking")):
        acked_at: list[float] = []
        helper = _ack_later(ledger, epoch - 1, 3.0, acked_at)
        state = _run(dagbag, dag_id, epoch)
        helper.join()
        assert "success" in state, dag_id
        opened = [e for e in ledger.history() if e.event == "epoch_opened" and e.detail["epoch"] == epoch]
        assert len(opened) == 1 and opened[0].at >= acked_at[0] - 0.05, (dag_id, opened, acked_at)
    assert ledger.frontier() == 4

    # A consumer DAG rerun for an old epoch never moves its acknowledgement back.
    assert "success" in _run(dagbag, "bp_consumer", 2)
    assert [(c.consumer, c.acked) for c in ledger.backpressure().consumers()] == [("report", 3)]


def test_open_refuses_a_bad_backpressure_wait():
    from airflow_epochs.operators import OpenEpochOperator

    with pytest.raises(ValueError, match="backpressure_wait must be None or a non-negative number of seconds, "
                                         "not -1"):
        OpenEpochOperator(task_id="o", pipeline="p", backpressure_wait=-1)
