"""Declared producers with ZooKeeper stopped, under Airflow's own scheduler (PostgreSQL): installing the
provider makes no task that a declaration does not name depend on ZooKeeper.

A declared producer runs first with ZooKeeper up (its vote is cast, and its task process caches the
host's filter of declared producers); then ZooKeeper is stopped. A task with an outlet that no
declaration names (``prod_other.load``) succeeds on its first try; a declared producer
(``prod_eu.load``) fails every try, its error naming its declaration. The task that is not a producer
tries to check the cached filter (``declared_check_timeout``) and, ZooKeeper not answering, decides
with it.
"""

from __future__ import annotations

import json
import time

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin
from declared_sales import DECLARED
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def own_zk(tmp_path_factory):
    """A ZooKeeper of this module's own: the test stops it."""
    server = EmbeddedZooKeeper(directory=tmp_path_factory.mktemp("zk-down"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, own_zk, airflow_pg_template):
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(tmp_path_factory.mktemp("declared-zk-down"), template=airflow_pg_template, env={
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps(
            {"conn_type": "zookeeper", "host": own_zk.hosts, "extra": {"connection_timeout": 3}}),
        "AIRFLOW__EPOCHS__DECLARED_PIPELINES": "declared",
        "AIRFLOW__EPOCHS__DECLARED_VOTE_BUDGET": "5"})
    try:
        deployment.start([REPO / "tests" / "dags" / "declared_producers.py"])
        yield deployment
    finally:
        deployment.stop()


def _finished(stack: AirflowStack, dag_id: str, timeout: float = 300) -> str:
    """The final state of the DAG's newest run."""
    deadline = time.monotonic() + timeout
    while True:
        newest = stack.query("SELECT state FROM dag_run WHERE dag_id = %s ORDER BY id DESC LIMIT 1", dag_id)
        if newest and newest[0][0] in ("success", "failed"):
            return str(newest[0][0])
        assert time.monotonic() < deadline, (dag_id, newest, stack.log_tail("scheduler"))
        time.sleep(2)


def _how_tries_ended(stack: AirflowStack) -> str:
    """Each prod_eu try log's last lines, and the scheduler's word on tries that failed before they ran: once
    (1 run in 4) no try log named the error, and these say which way a try ended (a try killed before its task
    ran, as when the API server's first execution request stalls for tens of seconds here, logs only its first
    line)."""
    ended = []
    for path in sorted((stack.home / "logs" / "dag_id=prod_eu").rglob("*.log")):
        lines = path.read_text(errors="replace").splitlines()
        ended.append(f"{path.parent.parent.name}/{path.name}: {len(lines)} lines, ending " + " | ".join(
            line[:300] for line in lines[-3:]))
    return "\n".join([*ended, stack.log_tail("scheduler", 4000)])


def _trigger(stack: AirflowStack, dag_id: str, key: str) -> None:
    stack.trigger(dag_id, {"key": key})  # through the API server: no Airflow start per run


def test_with_zookeeper_stopped_only_declared_producers_fail(stack, own_zk):
    client = KazooClient(hosts=own_zk.hosts)
    client.start(timeout=30)
    try:
        ledger = EpochLedger(client, "declared", owner="setup")
        ledger.create_pipeline(DECLARED.pipeline_config())
    finally:
        client.stop()
        client.close()
    stack.wait_for_dags(["prod_eu", "prod_other"])
    for dag_id in ("prod_eu", "prod_other"):
        stack.unpause(dag_id)

    _trigger(stack, "prod_eu", "2026-01-01")  # ZooKeeper up: the vote is cast, the filter cached
    assert _finished(stack, "prod_eu") == "success"
    assert (stack.home / "epochs" / "declared-producers.json").is_file()

    own_zk.stop()
    _trigger(stack, "prod_other", "2026-01-01")
    assert _finished(stack, "prod_other") == "success"
    tries = stack.query("SELECT try_number, state FROM task_instance WHERE dag_id = %s", "prod_other")
    assert tries == [(1, "success")], tries

    _trigger(stack, "prod_eu", "2026-01-02")
    assert _finished(stack, "prod_eu") == "failed"
    tries = stack.query("SELECT try_number, state FROM task_instance WHERE dag_id = %s AND run_id = "
                        "(SELECT run_id FROM dag_run WHERE dag_id = %s ORDER BY id DESC LIMIT 1)", "prod_eu", "prod_eu")
    assert tries == [(3, "failed")], tries
    logs = "".join(p.read_text(errors="replace") for p in (stack.home / "logs" / "dag_id=prod_eu").rglob("*.log"))
    assert "DeclaredVoteNotCast" in logs, _how_tries_ended(stack)
    assert "pipeline 'declared' partition 'sales' producer 'eu' key '2026-01-02'" in logs
    other = "".join(p.read_text(errors="replace") for p in (stack.home / "logs" / "dag_id=prod_other").rglob("*.log"))
    assert "deciding with the host's filter" in other  # the check found no ZooKeeper: the cached filter decided
