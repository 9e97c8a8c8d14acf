"""A TaskFlow pipeline (``tests/dags/taskflow_scheduled.py``: two ``@task.epoch_producer`` producers, a barrier,
a downstream DAG gated on the sealed partition) under Airflow's real scheduler and triggerer, for three
catch-up epochs with the stages inside the tasks (``EpochGroup(inline_stages=True)``): the epochs open and
seal in order although up to three runs are in flight, each epoch's barrier is released by both producers
before ``daily`` votes, the definition stored is the tasks' own, and the downstream DAG runs once per
sealed epoch, never before its seal."""

from __future__ import annotations

import time

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin
from zk_helpers import assert_epochs_in_order, fresh_chroot_client

from airflow_epochs.coordination import EpochLedger

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
EPOCHS = 3


@pytest.fixture(scope="module")
def stack_zk(zk_server):
    yield from fresh_chroot_client(zk_server, "taskflow")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, zk_server, stack_zk, airflow_pg_template):
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(tmp_path_factory.mktemp("stack"), template=airflow_pg_template,
                              env={"AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(stack_zk[0])})
    try:
        deployment.start([REPO / "tests" / "dags" / "taskflow_scheduled.py"])
        yield deployment
    finally:
        deployment.stop()



def test_a_taskflow_pipeline_runs_three_epochs_in_order_under_the_scheduler(stack, stack_zk):
    zk = stack_zk[1]
    stack.wait_for_dags(["taskflow_daily", "taskflow_report"])
    for dag_id in ("taskflow_report", "taskflow_daily"):
        stack.unpause(dag_id)
    stack.wait_for_successes("taskflow_daily", EPOCHS, 600)
    stack.wait_for_successes("taskflow_report", EPOCHS, 300)
    time.sleep(5)  # no late duplicate run
    ledger = EpochLedger(zk, "taskflow")
    assert ledger.frontier() == EPOCHS
    assert_epochs_in_order(ledger, EPOCHS)
    assert ledger.config_for(1).config.to_json() == {
        "partitions": {"orders": ["orders_eu", "orders_us"], "daily": ["daily"]},
        "barriers": {"loaded": ["orders_eu", "orders_us"]}}
    # three tasks an epoch, no open, close, arrival or barrier task of their own
    tasks = {task for (task,) in stack.query("SELECT DISTINCT task_id FROM task_instance WHERE dag_id = %s",
                                             "taskflow_daily")}
    assert tasks == {"epoch.orders_eu", "epoch.orders_us", "epoch.daily"}
    for epoch in range(1, EPOCHS + 1):
        seal = ledger.seal(epoch, "daily")
        assert seal is not None and seal.manifests["daily"]["rows"] == 11 * epoch, seal
        released = [e for e in ledger.history() if e.event == "barrier_released" and e.detail["epoch"] == epoch]
        assert [e.detail["barrier"] for e in released] == ["loaded"], released
        assert released[0].at <= ledger.vote_of(epoch, "daily", "daily").voted_at
    rows = stack.query("SELECT partition_key, extract(epoch FROM start_date) FROM dag_run WHERE dag_id = %s",
                       "taskflow_report")
    assert sorted(str(key) for key, _ in rows) == [str(e) for e in range(1, EPOCHS + 1)], rows
    for key, started in rows:  # a downstream run never starts before its partition's seal
        assert float(started) >= ledger.seal(int(str(key)), "daily").sealed_at - 0.5, (key, started)
