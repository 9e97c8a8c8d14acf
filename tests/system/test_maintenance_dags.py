"""Reconfiguration and rollback through DAG runs: a configuration scheduled from epoch 3 governs epoch
3 and not epoch 2; a rollback re-opens later epochs as a new generation with the reason recorded;
bad requests fail the task and leave the pipeline as it was."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


def _run(dagbag, dag_id: str, **conf: object) -> str:
    return str(dagbag.get_dag(dag_id).test(run_conf=conf).state)


def _opened(ledger: EpochLedger) -> list[tuple[int, int, int]]:
    return [(e.detail["epoch"], e.detail["generation"], e.detail["config_version"])
            for e in ledger.history() if e.event == "epoch_opened"]


def test_reconfigure_then_roll_back_through_dag_runs(dagbag, zk_connection, zk, capfd):
    ledger = EpochLedger(zk, "maint")
    for epoch in (1, 2):
        assert "success" in _run(dagbag, "maint_producer", epoch=epoch)

    # A configuration may not change under an epoch already opened: refused, nothing written.
    capfd.readouterr()
    assert "failed" in _run(dagbag, "maint_reconfigure", from_epoch=2)
    out = capfd.readouterr()
    assert "a configuration for epoch 2 must start after the newest opened epoch 2" in out.out + out.err
    assert [v.version for v in ledger.config_versions()] == [0]

    assert "success" in _run(dagbag, "maint_reconfigure", from_epoch=3)
    assert [(v.version, v.from_epoch) for v in ledger.config_versions()] == [(0, 1), (1, 3)]
    assert "success" in _run(dagbag, "maint_producer", epoch=3)
    assert _opened(ledger) == [(1, 1, 0), (2, 1, 0), (3, 1, 1)]  # epoch 3 runs under version 1
    assert ledger.config_for(3).config.window == 5

    # Bad rollbacks fail the task and change nothing.
    for conf, words in (({"to_epoch": "two"}, "to_epoch must be an integer, got 'two'"),
                        ({"to_epoch": 5}, "can only roll back to a sealed epoch"),
                        ({"to_epoch": 1, "reason": " "}, "needs a reason")):
        capfd.readouterr()
        assert "failed" in _run(dagbag, "maint_rollback", **conf), conf
        out = capfd.readouterr()
        assert words in out.out + out.err, conf
        assert ledger.frontier() == 3

    assert "success" in _run(dagbag, "maint_rollback", to_epoch=1, reason="join bug in epochs 2-3")
    assert ledger.frontier() == 1
    assert [ledger.epoch_info(e).state for e in (1, 2, 3)] == ["sealed", "rolled_back", "rolled_back"]
    rollback = [e for e in ledger.history() if e.event == "rollback"]
    assert len(rollback) == 1 and rollback[0].detail["reason"] == "join bug in epochs 2-3"

    # The producer runs epoch 2 again: a new generation, sealed; epoch 3 still waits its turn.
    assert "success" in _run(dagbag, "maint_producer", epoch=2)
    info = ledger.epoch_info(2)
    assert (info.state, info.generation) == ("sealed", 2)
    assert ledger.frontier() == 2
    assert _opened(ledger)[-1] == (2, 2, 0)
