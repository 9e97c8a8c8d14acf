"""Inline stages (EpochGroup(inline_stages=True)) against real ZooKeeper, with dag.test()."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("shape", ["inline", "stages"])
def test_taskflow_pipeline_seals_epochs(dagbag, zk_connection, zk, shape):
    dag = dagbag.get_dag(f"taskflow_{shape}")
    for epoch in (1, 2):
        run = dag.test(run_conf={"epoch": epoch})
        assert "success" in str(run.state), [(t.task_id, t.state) for t in run.get_task_instances()]
    ledger = EpochLedger(zk, f"tf_{shape}")
    assert ledger.frontier() == 2
    assert ledger.seal(2, "report").manifests["report"]["rows"] == 60
