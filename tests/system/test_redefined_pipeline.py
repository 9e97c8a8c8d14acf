"""A changed DAG is a new configuration version from a named epoch (``EpochGroup(from_epoch=N)``), with
``dag.test()`` on a real ZooKeeper: a producer added to the DAG after the pipeline exists takes part from
epoch N on; the epochs before it run under the stored version (the new task does nothing there and
succeeds, so the epoch seals with the producers it was opened with); every later open, by any deployment,
finds the version scheduled once."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


def _run(dagbag, dag_id: str, epoch: int):
    run = dagbag.get_dag(dag_id).test(run_conf={"epoch": epoch})
    assert "success" in str(run.state), [(t.task_id, t.state) for t in run.get_task_instances()]
    return run


def test_a_producer_added_to_the_dag_takes_part_from_the_epoch_it_names(dagbag, zk_connection, zk):
    _run(dagbag, "redefined_v1", 1)
    ledger = EpochLedger(zk, "redefined")
    assert [(v.version, v.from_epoch) for v in ledger.config_versions()] == [(0, 1)]

    run = _run(dagbag, "redefined_v2", 2)  # the DAG changed: its definition is scheduled from epoch 3
    assert [(v.version, v.from_epoch) for v in ledger.config_versions()] == [(0, 1), (1, 3)]
    assert ledger.config_for(3).config.partitions == {"orders": ("orders_eu", "orders_us")}
    assert sorted(ledger.seal(2, "orders").manifests) == ["orders_eu"]  # epoch 2 as it was opened
    us = next(t for t in run.get_task_instances() if t.task_id == "epoch.orders_us")
    assert us.xcom_pull(task_ids="epoch.orders_us") == {"epoch": 2, "taking_part": False, "config_version": 0}

    _run(dagbag, "redefined_v2", 3)
    _run(dagbag, "redefined_v2", 4)
    assert sorted(ledger.seal(3, "orders").manifests) == ["orders_eu", "orders_us"]
    assert sorted(ledger.seal(4, "orders").manifests) == ["orders_eu", "orders_us"]
    assert len(ledger.config_versions()) == 2  # every later open found the version scheduled once
    assert ledger.frontier() == 4
