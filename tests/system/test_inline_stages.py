"""Inline stages (``EpochGroup(inline_stages=True)``) beside the same DAG with stage tasks
(``tests/dags/inline_stages.py``), with ``dag.test()`` on a real ZooKeeper: both seal their epochs with the
same definition, the votes after the barrier's release, and one asset event per partition and epoch (the
epoch as partition key); the inline DAG does it with its three work tasks and nothing else."""

from __future__ import annotations

import time

import pytest

from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


def _asset_events(pipeline: str, since: float) -> list[tuple[str, str]]:
    from datetime import datetime, timezone

    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(AssetEvent).filter(AssetEvent.timestamp >= datetime.fromtimestamp(since, timezone.utc))
        return sorted((str(row.extra.get("partition")), str(row.partition_key)) for row in rows
                      if row.extra.get("pipeline") == pipeline)


@pytest.mark.parametrize("shape", ["inline", "stages"])
def test_taskflow_pipeline_seals_epochs(dagbag, zk_connection, zk, shape):
    dag = dagbag.get_dag(f"taskflow_{shape}")
    tasks = sorted(t.task_id.rsplit(".", 1)[-1] for t in dag.tasks)
    if shape == "inline":
        assert tasks == ["orders_eu", "orders_us", "report"]
    else:
        assert tasks == ["close", "open", "orders_eu", "orders_eu_arrives", "orders_us", "orders_us_arrives",
                         "report"]
    started = time.time() - 1
    for epoch in (1, 2):
        run = dag.test(run_conf={"epoch": epoch})
        assert "success" in str(run.state), [(t.task_id, t.state) for t in run.get_task_instances()]
    ledger = EpochLedger(zk, f"tf_{shape}")
    assert ledger.frontier() == 2
    assert ledger.config_for(1).config.to_json() == {"partitions": {"orders": ["orders_eu", "orders_us"],
                                                                    "report": ["report"]},
                                                     "barriers": {"loaded": ["orders_eu", "orders_us"]}}
    for epoch in (1, 2):
        assert ledger.seal(epoch, "report").manifests["report"]["rows"] == 30 * epoch
        released = next(e.at for e in ledger.history() if e.event == "barrier_released" and e.detail["epoch"] == epoch)
        assert released <= ledger.vote_of(epoch, "report", "report").voted_at
        assert ledger.epoch_info(epoch).attempt == 1  # the two first tasks shared one attempt
    assert _asset_events(f"tf_{shape}", started) == sorted(
        (partition, str(epoch)) for partition in ("orders", "report") for epoch in (1, 2))
