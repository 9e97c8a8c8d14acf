"""Declared producers under Airflow's own scheduling: PostgreSQL, two schedulers, two triggerers, the
API server and the DAG processor, for the three plain producer DAGs of tests/dags/declared_producers.py
and the consumer of tests/dags/declared_consumer.py.

Keys 2026-01-01..03 get all three producers, key 2026-01-04 only one. Meanwhile a producer's first
try kills itself (-9) and Airflow retries it, a producer runs again for a sealed key, and the
triggerer that runs the gate's watcher is killed -9. Exactly one consumer run per complete key, none
for the incomplete one.
"""

from __future__ import annotations

import json
import time

import pytest
from airflow_stack import AirflowStack
from declared_sales import DECLARED
from module_stack import module_stack, wait_until
from zk_helpers import fresh_chroot_client

from airflow_epochs.coordination import EpochLedger

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

COMPLETE = ("2026-01-01", "2026-01-02", "2026-01-03")
INCOMPLETE = "2026-01-04"


@pytest.fixture(scope="module")
def stack_zk(zk_server):
    yield from fresh_chroot_client(zk_server, "declared-scheduled")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, zk_server, stack_zk, airflow_pg_template):
    yield from module_stack(tmp_path_factory.mktemp("declared"), airflow_pg_template, {
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(stack_zk[0]),
        "AIRFLOW__EPOCHS__DECLARED_PIPELINES": "declared",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2"}, ["declared_producers.py", "declared_consumer.py"],
        [("scheduler-2", ["scheduler"]), ("triggerer-2", ["triggerer"])])


def _trigger(stack: AirflowStack, dag_id: str, key: str, **conf: object) -> None:
    # Through the API server: an `airflow dags trigger` is a whole Airflow start (1-2 minutes each at load 30).
    stack.trigger(dag_id, {"key": key, **conf})


def _consumed(stack: AirflowStack) -> list[str]:
    """The key of each consumer run that received one (the receive task's result), in run order."""
    rows = stack.query("SELECT x.value FROM xcom x JOIN dag_run r ON r.dag_id = x.dag_id AND r.run_id = x.run_id "
                       "WHERE x.dag_id = %s AND x.task_id = %s AND x.key = %s ORDER BY r.id",
                       "sales_report", "receive", "return_value")
    values = [json.loads(value) if isinstance(value, str) else value for (value,) in rows]
    return [key["partition_key"] for value in values for key in value["keys"]]


def test_one_consumer_run_per_complete_key_under_two_schedulers_and_two_triggerers(stack, stack_zk):
    zk = stack_zk[1]
    ledger = EpochLedger(zk, "declared", owner="setup")
    ledger.create_pipeline(DECLARED.pipeline_config())
    producers = ("prod_eu", "prod_us", "prod_returns")
    stack.wait_for_dags(["sales_report", *producers])
    for dag_id in ("sales_report", *producers):  # the consumer first: an event while it is paused starts nothing
        stack.unpause(dag_id)

    # key 1, with prod_us's first try killed -9 before it reports success: Airflow retries it
    _trigger(stack, "prod_us", COMPLETE[0], die_on_first_try=True)
    for dag_id in ("prod_eu", "prod_returns"):
        _trigger(stack, dag_id, COMPLETE[0])
    wait_until(lambda: _consumed(stack) == [COMPLETE[0]], 600,
                lambda: (_consumed(stack), ledger.frontier(), stack.log_tail("scheduler"), stack.log_tail("triggerer")))
    tries = stack.query("SELECT try_number, state FROM task_instance WHERE dag_id = %s", "prod_us")
    assert tries == [(2, "success")], tries

    # the triggerer running the gate's watcher dies; keys 2 and 3 complete, out of order
    wait_until(lambda: stack.watcher_triggerer() is not None, 120, lambda: "no triggerer owns the watcher")
    stack.running("triggerer", "triggerer-2")  # the other one is there to take over
    stack.kill(stack.watcher_triggerer())
    for key in (COMPLETE[2], COMPLETE[1]):
        for dag_id in producers:
            _trigger(stack, dag_id, key)
    _trigger(stack, "prod_eu", INCOMPLETE)
    wait_until(lambda: len(_consumed(stack)) >= 3, 900,
                lambda: (_consumed(stack), ledger.frontier(), stack.log_tail("triggerer"),
                         stack.log_tail("triggerer-2")))

    # a producer runs again for a sealed key: reported, and the consumer does not run again
    _trigger(stack, "prod_us", COMPLETE[1])
    wait_until(lambda: [r["state"] for r in stack.runs("prod_us")].count("success") == 4, 300,
                lambda: stack.runs("prod_us"))
    time.sleep(20)  # room for a late duplicate
    assert _consumed(stack) == list(COMPLETE)
    runs = stack.runs("sales_report")
    assert len(runs) == 3 and {r["state"] for r in runs} == {"success"}, runs
    assert ledger.frontier() == 3
    assert ledger.epoch_info(4) is None or ledger.epoch_info(4).state == "open"
    logs = "".join(p.read_text(errors="replace") for p in (stack.home / "logs" / "dag_id=prod_us").rglob("*.log"))
    assert "Declared producer ran again AFTER the seal" in logs
