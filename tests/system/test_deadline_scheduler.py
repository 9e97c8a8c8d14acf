"""Partition deadlines under Airflow's own scheduler and two triggerers (PostgreSQL, API server,
scheduler, DAG processor): two deferred watches of one late partition raise one alert; the triggerer
running its callback is killed -9 mid-callback, and the other triggerer delivers it, once; the
partition sealing late is recorded with its lateness; a partition sealed in time raises no alert."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin
from zk_helpers import fresh_chroot_client

from airflow_epochs.coordination import DeadlineSpec, EpochLedger, PipelineConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack_zk(zk_server):
    yield from fresh_chroot_client(zk_server, "deadlines")


@pytest.fixture(scope="module")
def alerts(tmp_path_factory):
    return tmp_path_factory.mktemp("alerts") / "alerts.jsonl"


@pytest.fixture(scope="module")
def stack(tmp_path_factory, zk_server, stack_zk, airflow_pg_template, alerts):
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(tmp_path_factory.mktemp("stack"), template=airflow_pg_template, env={
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(stack_zk[0], session_timeout=4),
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "PYTHONPATH": str(REPO / "tests" / "helpers"),  # the test's callbacks
        "EPOCHS_TEST_ALERTS": str(alerts)})
    try:
        deployment.start([REPO / "tests" / "dags" / "deadline_watch.py"])
        deployment.spawn("triggerer-2", ["triggerer"])
        yield deployment
    finally:
        deployment.stop()


def _wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what()
        time.sleep(0.5)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _task_states(stack, run_id):
    rows = stack.query("SELECT task_id, state FROM task_instance WHERE dag_id = 'deadline_watch' AND run_id = %s",
                       run_id)
    return {str(task): str(state) for task, state in rows}


def _trigger_run(stack, epoch):
    run_id = f"epoch-{epoch}"
    done = stack.airflow("dags", "trigger", "deadline_watch", "--run-id", run_id,
                         "--conf", json.dumps({"epoch": epoch}))
    assert done.returncode == 0, done.stderr
    _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"deferred"}, 150,
                lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
    return run_id


def _triggerer_of(stack, pid):
    for name in ("triggerer", "triggerer-2"):
        proc = stack.procs.get(name)
        if proc is not None and os.getpgid(pid) == proc.pid:
            return name
    raise AssertionError(f"pid {pid} is in no triggerer's process group")


def test_one_alert_across_two_triggerers_with_the_alerting_one_killed_9(stack, stack_zk, alerts):
    ledger = EpochLedger(stack_zk[1], "late", owner="outside")
    ledger.create_pipeline(PipelineConfig({"daily": ("fast", "slow")}))
    ledger.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=3.0))
    stack.wait_for_dags(["deadline_watch"])
    assert stack.airflow("dags", "unpause", "deadline_watch").returncode == 0
    run_id = _trigger_run(stack, 1)  # both watches deferred before the epoch even opens
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "daily", "fast", {})
    deadline = ledger.epoch_info(1).opened_at + 3.0
    started = alerts.with_name(alerts.name + ".started")
    _wait_until(lambda: bool(_lines(started)), 60, lambda: (stack.log_tail("triggerer"), stack.log_tail("triggerer-2")))
    first = _lines(started)[0]
    assert 0 <= first["at"] - deadline < 1.0, first["at"] - deadline
    assert [m["producer"] for m in first["alert"]["missing"]] == ["slow"]
    stack.running("triggerer", "triggerer-2")
    crashed = _triggerer_of(stack, first["pid"])
    stack.kill(crashed)  # -9, mid-callback: the alert is raised, not delivered

    _wait_until(lambda: bool(_lines(alerts)), 120,
                lambda: (_lines(started), stack.log_tail("triggerer"), stack.log_tail("triggerer-2")))
    _wait_until(lambda: ledger.deadlines().alert(1, "daily").delivered_at is not None, 30, lambda: "not delivered")
    time.sleep(3)  # room for a late duplicate
    delivered = _lines(alerts)
    assert len(delivered) == 1 and _triggerer_of(stack, delivered[0]["pid"]) != crashed
    assert len(_lines(started)) == 2  # the killed callback, and the one that delivered
    assert [e.event for e in ledger.history()].count("deadline_missed") == 1

    # The late partition seals: the watches (still deferred) record once how late it was, then succeed.
    ledger.vote(attempt, "daily", "slow", {})
    _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"success"}, 120,
                lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
    alert = ledger.deadlines().alert(1, "daily")
    assert alert.sealed_at is not None and alert.late_by > 0
    assert [e.event for e in ledger.history()].count("sealed_late") == 1
    stack.respawn(crashed)


def test_a_partition_sealed_in_time_raises_no_alert(stack, stack_zk, alerts):
    ledger = EpochLedger(stack_zk[1], "late", owner="outside")
    ledger.deadlines().declare(DeadlineSpec("daily", mode="fixed", anchor="opened", delta=20.0))
    before = len(_lines(alerts.with_name(alerts.name + ".started")))
    run_id = _trigger_run(stack, 2)
    attempt = ledger.open_epoch(2)
    ledger.vote(attempt, "daily", "fast", {})
    ledger.vote(attempt, "daily", "slow", {})
    _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"success"}, 120,
                lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
    assert len(_lines(alerts.with_name(alerts.name + ".started"))) == before
    assert ledger.deadlines().check(2, "daily").state == "in_time"
    assert ledger.deadlines().alert(2, "daily") is None


def test_watches_started_while_the_api_server_stalls_still_run(stack, stack_zk, alerts):
    """The API server stalls while both watches start: frozen with SIGSTOP from before the run is
    triggered until 45 s after its tasks are queued, time for the workers to send their start calls
    (under a load average of 37 it was seen answering its first start call after 50 s). Airflow's task
    client gives up on a call after ``[workers] execution_api_timeout`` and retries it, but the start it
    gave up on is applied when the server wakes, so the retry is refused and the task fails although it
    was started. The test deployment waits as long as the API server's own request timeout: both watches
    run, defer and succeed once the partition seals (runs after the tests above)."""
    ledger = EpochLedger(stack_zk[1], "late", owner="outside")
    run_id = "epoch-3"
    api_server = stack.procs["api-server"].pid
    os.kill(api_server, signal.SIGSTOP)
    try:
        done = stack.airflow("dags", "trigger", "deadline_watch", "--run-id", run_id,
                             "--conf", json.dumps({"epoch": 3}))  # straight into the database
        assert done.returncode == 0, done.stderr
        _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"queued"}, 150,
                    lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
        # the start calls arrive (up to half a minute after queueing under load) and wait longer than the
        # task client's default 5 s call timeout
        time.sleep(45)
    finally:
        os.kill(api_server, signal.SIGCONT)
    _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"deferred"}, 150,
                lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
    attempt = ledger.open_epoch(3)
    ledger.vote(attempt, "daily", "fast", {})
    ledger.vote(attempt, "daily", "slow", {})
    _wait_until(lambda: set(_task_states(stack, run_id).values()) == {"success"}, 120,
                lambda: (_task_states(stack, run_id), stack.log_tail("scheduler")))
