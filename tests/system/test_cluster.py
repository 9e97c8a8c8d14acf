"""The main job on the production topology (issue 36), short: 3 days of ``nycflights_daily`` and
``nycflights_report``, unchanged, under two schedulers, two triggerers and two Celery workers, on a
3-node ZooKeeper ensemble (TLS, digest) and a Spark standalone cluster behind a Spark Connect server;
a Celery worker is killed -9 while it runs a Spark epoch task, then the ZooKeeper leader during
another one. Every component is started by :mod:`cluster_topology` (as ``scripts/cluster.sh up``
does) and supervised the way a process supervisor would.

Checked: the sealed figures equal one Spark computation over the same days, row for row; one seal per
(epoch, partition); one report run per day; each fault recovered, the killed worker's task retried
and sealed once; seal-to-downstream and seconds per epoch measured for each day; the timeline picture drawn.

And issue 48: a second user polling for secret files from before the start reads none, and no secret is on
a command line. And issue 35 on this topology: once it is up, a throw-away second local user finds no port of the
cluster's processes it can use (every socket on loopback; no HTTP page with data, Redis command,
PostgreSQL login or ZooKeeper session without our credentials), the Celery workers' and the triggerers' log
servers among them; during the run the API server shows a running task's log, fetched from its worker's log
server, and a deferred task's trigger log, fetched from its triggerer's log server.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import postgres_bin
from cluster_exposure import PROTECTED, RunningLogWatch, TriggerLogWatch, listening_sockets, loopback, probe
from cluster_logs import triggerer_address, worker_address
from cluster_run import Driver
from cluster_supervisor import Supervisor
from cluster_topology import Cluster
from intruder import second_user
from secret_poller import polling_for_secrets, secrets_on_command_lines

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.ensemble, pytest.mark.timeout(1200)]

DAYS = 3
SECRET_FILES = ("pwfile", "initdb-secret/pwfile")  # initdb's password file: the old name and the new one


def test_three_days_on_celery_survive_a_worker_and_the_zookeeper_leader_killed(tmp_path):
    if postgres_bin() is None or shutil.which("redis-server") is None:
        pytest.fail("PostgreSQL and Redis server binaries are needed: scripts/system_deps.sh installs them")
    # Both Celery workers run their epoch jobs through Spark Connect: CI's time allows no spark-submit JVM
    # per job (worker 2 on spark-submit, as `cluster.sh up` and the benchmark's faults run have it, took
    # 670 s for these 3 days on a loaded machine; test_spark_standalone_auth.py submits onto the same master).
    cluster = Cluster(tmp_path / "cluster", days=DAYS)
    try:
        with second_user() as intruder:
            # Issue 48: the second user polls for secret files from before the start (PostgreSQL's password
            # file was read 18.6 s into `cluster.sh up`), then reads every process's command line.
            with polling_for_secrets(intruder, [tempfile.gettempdir()], SECRET_FILES) as polled:
                cluster.start()
            secrets = _cluster_secrets(cluster)
            on_command_lines = secrets_on_command_lines(intruder, secrets)
            sockets = listening_sockets(cluster)
            answers = probe(intruder, sockets)
        assert polled.rounds >= 20, polled  # it polled all through the start
        assert polled.holding(*secrets.values()) == {}, polled.holding(*secrets.values())
        assert on_command_lines == [], on_command_lines
        hosts = (worker_address(1), worker_address(2))  # the two workers' log servers
        triggerers = (triggerer_address(1), triggerer_address(2))  # the two triggerers'
        _nothing_usable(cluster, sockets, answers, hosts, triggerers)
        with Supervisor(cluster) as supervisor, RunningLogWatch(cluster, "nycflights_daily", hosts) as watch, \
                TriggerLogWatch(cluster, "nycflights_daily", triggerers, cluster.trigger_log_port) as triggers:
            driver = Driver(cluster.state)
            try:
                outcome = driver.run(("celery-worker", "zookeeper-leader"), timeout=900)
                retried = driver.query("SELECT task_id, try_number FROM task_instance WHERE dag_id = "
                                       "'nycflights_daily' AND try_number > 1")
            finally:
                driver.close()
        print(outcome.markdown())
    finally:
        cluster.stop()

    # the API server showed a running task's log from the worker's log server
    assert watch.seen is not None, watch.errors
    print(f"running task's log: {watch.seen[0]} on {watch.seen[1]}; {len(sockets)} listening sockets probed")
    # ... and a deferred task's trigger log from its triggerer's log server (the triggerer's own folder)
    assert triggers.seen is not None, triggers.errors
    print(f"deferred task's trigger log: {triggers.seen[0]} on {triggers.seen[1]}")

    assert driver.fault_errors == []
    assert outcome.check.endswith("all equal"), outcome.check
    assert outcome.days_exact == 1.0
    assert (outcome.duplicate_seals, outcome.missing_seals) == (0, 0)
    assert outcome.one_report_run_per_day, outcome.report_runs
    worker, leader = outcome.faults
    assert worker.killed.startswith("celery-worker-") and worker.recovered_s is not None
    assert leader.killed.startswith("zookeeper-") and leader.recovered_s is not None
    # the killed worker's Spark task ran again (on a worker alive then) and its partition sealed once
    assert any(task == worker.detail.split()[-1] for task, _ in retried), retried
    assert worker.killed in supervisor.restarted and leader.killed in supervisor.restarted
    assert sorted(outcome.epoch_s) == sorted(outcome.seal_to_downstream_s) == list(range(1, DAYS + 1))
    assert all(0 < s < 600 for s in [*outcome.epoch_s.values(), *outcome.seal_to_downstream_s.values()])
    assert outcome.spark_submit_jobs == []  # read from the master's UI with the cluster's signed token
    assert all(Path(picture).stat().st_size > 1000 for picture in outcome.timeline) and len(outcome.timeline) == 2


def _cluster_secrets(cluster: Cluster) -> dict[str, str]:
    """Every secret of the cluster: its generated keys and passwords, PostgreSQL's and the ensemble's."""
    assert cluster.stack is not None and cluster.ensemble is not None and cluster.ensemble.auth is not None
    found = {**cluster.secrets, "postgres": cluster.stack.db_password, "zookeeper": cluster.ensemble.auth.password}
    assert len(found) >= 8 and all(len(value) >= 16 for value in found.values()), sorted(found)
    return found


def _nothing_usable(cluster: Cluster, sockets: list[tuple[str, int]], answers: dict[str, dict[str, Any]],
                    hosts: tuple[str, ...], triggerers: tuple[str, ...]) -> None:
    """Issue 35: every socket on loopback, each worker's and triggerer's log server on its own address,
    nothing usable."""
    assert [s for s in sockets if not loopback(s[0])] == [], sockets
    servers = {(host, cluster.log_port) for host in hosts} | {(host, cluster.trigger_log_port) for host in triggerers}
    assert servers <= set(sockets), sockets
    assert set(answers) == {f"{a}:{p}" for a, p in sockets}, answers
    api = f"127.0.0.1:{cluster.stack.api_port}"
    for target, got in answers.items():
        codes = {path: line.split()[1] for path, line in zip(PROTECTED, got["http"], strict=True)
                 if line.startswith("HTTP/") and len(line.split()) > 1}
        if target == api:  # Airflow's UI answers every other path with its page shell (public: the login page)
            codes = {path: code for path, code in codes.items() if path.startswith("/api/v2/")}
            assert set(codes.values()) == {"401"}, (target, got)
        assert not [c for c in codes.values() if c.startswith("2")], (target, got)  # no page with data
        assert got["redis"] != "+PONG" and got["pg"] != "R0" and got["zk"] == "none", (target, got)
    for host, port in servers:  # the control: the probe reached the log servers, which asked for a token
        assert answers[f"{host}:{port}"]["http"][2].split()[1] == "403", answers  # the /log/ path
    assert any(got["redis"].startswith("-NOAUTH") for got in answers.values()), answers  # ... and Redis
    # ... and the probe sees a ZooKeeper session where there is one: ours, with our client certificate
    zookeeper = cluster.state()["zookeeper"]
    ports = [("127.0.0.1", int(m["port"])) for m in zookeeper["members"]]
    ours = probe(None, ports, cert=(zookeeper["certfile"], zookeeper["keyfile"]))
    assert [got["zk"] for got in ours.values()] == ["session"] * 3, ours
    assert {p for _, p in ports} <= {int(t.rpartition(":")[2]) for t in answers}, answers  # which it tried
