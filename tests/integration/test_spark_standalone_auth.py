"""Issue 36: the Spark standalone cluster of ``scripts/cluster.sh`` (a master, a worker and a Spark
Connect server attached to them, as :mod:`cluster_topology` starts them) is reachable only by us.

A throw-away second local user (created and removed by the test) asks the master's RPC port for the
master's state and the worker's for the worker's, through Spark's own RPC client: both refuse it in
their SASL handshake. The control is the same request from the same user with the cluster's secret,
which gets its answer: the request is a real one and authentication is what stops it. Every port of the
master, the worker, its executor and the Connect server's driver is on loopback and serves no page to
that user; the UIs answer 403 without the cluster's signed token and 200 with it (the control).

Then an epoch job goes through ``spark-submit`` onto that master (not through Connect): its Spark
connection carries the cluster's secret as its password, the driver joins the authenticated cluster,
its executor runs on the worker, and the partition is sealed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_topology import Cluster
from intruder import second_user, shared_folder
from listening_sockets import listening_addresses
from spark_attacks import DEPLOY_ATTACK_SOURCE, HTTP_GET, compile_attack
from spark_pipeline import JOB, PARTITION, PRODUCER, pipeline, write_inputs
from spark_standalone import ui_get, ui_token

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("standalone") / "cluster", days=1)
    cluster.prepare_spark(workers=1)
    try:
        cluster.start_spark()
        token = ui_token(cluster.secrets["spark_ui"])
        deadline = time.monotonic() + 180
        while True:  # the worker registers a few seconds after the master listens
            status, body = ui_get(cluster.master_ui, token=token)
            if status == 200 and any(w["state"] == "ALIVE" for w in json.loads(body)["workers"]):
                break
            assert time.monotonic() < deadline, (status, body[:300])
            time.sleep(1)
        yield cluster
    finally:
        cluster.stop()


def _group(leader: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == leader:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _rpc_port(log: Path, service: str) -> int:
    import re

    found = re.findall(rf"Successfully started service '{service}' on port (\d+)", log.read_text(errors="replace"))
    assert found, f"{service}'s port is not in {log.name}"
    return int(found[-1])


def test_another_user_gets_no_answer_from_the_master_the_worker_or_their_uis(standalone):
    if shutil.which("javac") is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("javac builds the attacker")
    assert standalone.connect is not None
    assert standalone.connect.healthy(timeout=300) == (True, "answered")  # the Connect server's executor runs
    master, worker = standalone.procs["spark-master"].pid, standalone.procs["spark-worker-1"].pid
    master_port = standalone.master_port
    worker_port = _rpc_port(standalone.base / "spark-worker-1" / "spark-worker-1.log", "sparkWorker")
    token = ui_token(standalone.secrets["spark_ui"])
    groups = {"master": _group(master), "worker": _group(worker), "connect": _group(standalone.connect.pid or 0)}
    assert len(groups["worker"]) >= 2, "the worker runs no executor"  # the executor is in the worker's group
    ports = {name: sorted(listening_addresses(pids)) for name, pids in groups.items()}
    for name, found in ports.items():
        assert found and all(address in LOOPBACK for address, _ in found), (name, found)
    assert (ui_get(standalone.master_ui, token=None)[0], ui_get(standalone.master_ui, token=token)[0]) == (403, 200)
    with second_user() as intruder, shared_folder() as shared:
        classpath = compile_attack(shared / "attack", DEPLOY_ATTACK_SOURCE)
        for port, endpoint in ((master_port, "Master"), (worker_port, "Worker")):
            forged = intruder.run(["java", "-cp", classpath, "ForgedDeployRequest", str(port), endpoint],
                                  check=False, timeout=180, cwd="/")
            assert forged.returncode == 3 and "Expected SaslMessage" in forged.stdout, (endpoint, forged)
            control = intruder.run(["env", f"AIRFLOW_EPOCHS_ATTACK_SECRET={standalone.secrets['spark']}", "java",
                                    "-cp", classpath, "ForgedDeployRequest", str(port), endpoint],
                                   check=False, timeout=180, cwd="/")
            # With the secret the endpoint answers (a worker's answer holds its executors' runners, which
            # Spark cannot send over the wire: the error names the answer it built).
            assert f"{endpoint}StateResponse" in control.stdout, (endpoint, control.stdout)
            assert "Expected SaslMessage" not in control.stdout, (endpoint, control.stdout)
        for name, found in ports.items():
            for _, port in found:
                page = intruder.run(["/usr/bin/python3", "-I", "-c", HTTP_GET, str(port)], check=False, cwd="/")
                assert " 200 " not in page.stdout and " 302 " not in page.stdout, (name, port, page.stdout)
    # the secrets are on no command line of any of these processes
    for pids in groups.values():
        for pid in pids:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert standalone.secrets["spark"].encode() not in cmdline
            assert standalone.secrets["spark_ui"].encode() not in cmdline


def test_an_epoch_job_goes_through_spark_submit_onto_the_authenticated_master(standalone, zk_connection, zk,
                                                                               tmp_path, monkeypatch, capfd):
    from airflow_epochs.hooks.spark_epoch import SparkEpochHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", json.dumps({
        "conn_type": "spark", "host": "127.0.0.1", "port": standalone.master_port,
        "password": standalone.secrets["spark"]}))
    ledger = pipeline(zk, "standalone_submit")
    inputs = write_inputs(tmp_path / "in", 1)
    hook = SparkEpochHook(application=str(JOB), conn_id="spark_standalone",
                          submit_options={"executor_memory": "512m"})
    assert hook.check_master() == "standalone"
    outcome = hook.submit_and_seal(ledger.open_epoch(1), PARTITION, PRODUCER, storage=str(tmp_path / "out"),
                                   inputs={"events": inputs[1]})
    assert outcome.action == "ran" and outcome.partition_sealed, outcome
    # the job ran on the cluster, as an application of the master (its executor on the worker)
    status, body = ui_get(standalone.master_ui, token=ui_token(standalone.secrets["spark_ui"]))
    apps = [app["name"] for app in json.loads(body)["completedapps"]]
    assert status == 200 and f"epochs:standalone_submit:{PARTITION}:1" in apps, apps  # the job's own name
    printed = capfd.readouterr()
    assert "--properties-file" in printed.out + printed.err  # spark-submit's logged command and Spark's log...
    assert standalone.secrets["spark"] not in printed.out + printed.err  # ...never show the secret
