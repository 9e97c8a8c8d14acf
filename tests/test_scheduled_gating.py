"""Gating under Airflow's own scheduling (not dag.test): PostgreSQL, API server, scheduler, triggerer
and DAG processor started by the test. Each sealed partition gives exactly one downstream run (a
partitioned-asset run whose partition key is the epoch), and the deferred sensor in it passes only
because the seal exists."""

from __future__ import annotations

import json
import time

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin

from airflow_epochs.coordination import EpochLedger

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def stack(tmp_path, zk_server, zk_chroot):
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(tmp_path, env={"AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps(
        {"conn_type": "zookeeper", "host": zk_server.hosts, "schema": zk_chroot})})
    try:
        deployment.start([REPO / "tests" / "dags" / "scheduled_gating.py"])
        yield deployment
    finally:
        deployment.stop()


def test_one_downstream_run_per_sealed_partition_under_the_scheduler(stack, zk):
    stack.wait_for_dags(["gating_upstream", "gating_downstream"])
    for dag_id in ("gating_downstream", "gating_upstream"):
        assert stack.airflow("dags", "unpause", dag_id).returncode == 0
    epochs = (1, 2, 3)
    for epoch in epochs:
        triggered = stack.airflow("dags", "trigger", "gating_upstream", "-c", json.dumps({"epoch": epoch}))
        assert triggered.returncode == 0, triggered.stderr[-2000:]
    deadline = time.monotonic() + 480
    while True:
        runs = stack.runs("gating_downstream")
        done = [r for r in runs if r["state"] == "success"]
        if len(done) >= len(epochs):
            break
        assert not [r for r in runs if r["state"] == "failed"], (runs, stack.log_tail("scheduler"))
        assert time.monotonic() < deadline, (stack.runs("gating_upstream"), runs, stack.log_tail("scheduler"),
                                             stack.log_tail("triggerer"))
        time.sleep(3)
    time.sleep(10)  # no late duplicate arrives
    runs = stack.runs("gating_downstream")
    ledger = EpochLedger(zk, "gating")
    assert ledger.frontier() == len(epochs)
    assert len(runs) == len(epochs), runs
    rows = stack.query("SELECT partition_key, extract(epoch FROM start_date) FROM dag_run WHERE dag_id = %s",
                       "gating_downstream")
    assert sorted(str(key) for key, _ in rows) == [str(e) for e in epochs], rows
    for key, started in rows:  # a downstream run never starts before its partition's seal
        seal = ledger.seal(int(str(key)), "daily")
        assert seal is not None
        assert float(started) >= seal.sealed_at - 0.5, (key, started, seal.sealed_at)
