"""A declared producer cleared after its key sealed, under Airflow's own scheduler (PostgreSQL), with
``[epochs] reopen_on_rerun = true``.

Key 2026-01-01 is sealed by the three plain producer DAGs of tests/dags/declared_producers.py; one of
them (``prod_returns``) has its first try killed -9 after its vote and before its success: its retry
is a retry, not a re-run (nothing reported, nothing reopened). Then ``airflow tasks clear`` runs
``prod_us.load`` of the same DAG run again (try 2): that is a re-run. It is reported in its task log
and once in the pipeline's history (``producer_rerun``, which the Epochs page lists), and the key is
rolled back and sealed again (generation 2).
"""

from __future__ import annotations

import json

import pytest
from airflow_stack import AirflowStack
from declared_sales import DECLARED
from module_stack import module_stack, wait_until
from zk_helpers import fresh_chroot_client

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.wire.events import ProducerRerun

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

KEY = "2026-01-01"


@pytest.fixture(scope="module")
def stack_zk(zk_server):
    yield from fresh_chroot_client(zk_server, "declared-cleared")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, zk_server, stack_zk, airflow_pg_template):
    yield from module_stack(tmp_path_factory.mktemp("declared-cleared"), airflow_pg_template, {
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(stack_zk[0]),
        "AIRFLOW__EPOCHS__DECLARED_PIPELINES": "declared",
        "AIRFLOW__EPOCHS__REOPEN_ON_RERUN": "true"}, ["declared_producers.py"])


def _tries(stack: AirflowStack, dag_id: str) -> list[tuple[object, ...]]:
    return stack.query("SELECT try_number, state FROM task_instance WHERE dag_id = %s", dag_id)


def _reruns(ledger: EpochLedger) -> list[ProducerRerun]:
    return [e.record for e in ledger.history() if isinstance(e.record, ProducerRerun)]


def test_a_producer_cleared_after_the_seal_is_reported_and_reopens_the_key(stack, stack_zk):
    ledger = EpochLedger(stack_zk[1], "declared", owner="setup")
    ledger.create_pipeline(DECLARED.pipeline_config())
    producers = ("prod_eu", "prod_us", "prod_returns")
    stack.wait_for_dags(list(producers))
    for dag_id in producers:
        assert stack.airflow("dags", "unpause", dag_id).returncode == 0
    for dag_id in producers:
        conf = {"key": KEY, **({"die_on_first_try": True} if dag_id == "prod_returns" else {})}
        done = stack.airflow("dags", "trigger", dag_id, "-c", json.dumps(conf))
        assert done.returncode == 0, done.stderr[-2000:]
    wait_until(lambda: all(_tries(stack, d) and _tries(stack, d)[0][1] == "success" for d in producers), 600,
                lambda: ([_tries(stack, d) for d in producers], stack.log_tail("scheduler")))
    assert _tries(stack, "prod_returns") == [(2, "success")]  # try 1 killed -9 after its vote: retried
    assert ledger.frontier() == 1 and ledger.seal(1, "sales").generation == 1
    assert _reruns(ledger) == []  # the retry was not taken for a re-run

    cleared = stack.airflow("tasks", "clear", "prod_us", "-t", "load", "-y")  # -t: a substring in 3.3
    assert cleared.returncode == 0, cleared.stderr[-2000:]
    wait_until(lambda: _tries(stack, "prod_us") == [(2, "success")], 600,
                lambda: (_tries(stack, "prod_us"), stack.log_tail("scheduler")))
    assert ledger.frontier() == 1 and ledger.seal(1, "sales").generation == 2  # rolled back, sealed again
    reruns = _reruns(ledger)
    assert [(r.epoch, r.producer, r.cleared, r.succeeded_try, r.try_number, r.reopened) for r in reruns] == [
        (1, "us", True, 1, 2, True)], reruns
    logs = "".join(p.read_text(errors="replace") for p in (stack.home / "logs" / "dag_id=prod_us").rglob("*.log"))
    assert "cleared after its try 1 succeeded; the key was rolled back and is sealed again" in logs, logs[-3000:]
