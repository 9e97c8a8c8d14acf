"""SparkEpochOperator in real DAG runs: spark-submit on local[2] with the Spark driver killed and the
Airflow task process killed (-9) mid-job, a Spark standalone master + worker on loopback, a warm Spark
Connect server, and a refused out-of-order submission. Sealed results are compared with pandas."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from airflow_db import private_airflow_db
from spark_pipeline import (
    JOB,
    PARTITION,
    PRODUCER,
    assert_matches_pandas,
    run_clean,
    run_dirs,
    sealed_result,
    write_inputs,
)
from zk_helpers import pid_alive

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.servers.embedded_spark_connect import spark_home
from airflow_epochs.servers.embedded_zookeeper import free_port
from airflow_epochs.spark import sealed_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture
def spark_local(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return "spark_local"


def _conf(tmp_path: Path, epoch: int, inputs: dict[int, str], **extra) -> dict:
    faults = tmp_path / "faults"
    faults.mkdir(exist_ok=True)
    return {"epoch": epoch, "job": str(JOB), "storage": str(tmp_path / "out"),
            "inputs": str(Path(inputs[1]).parent), "faults": str(faults), **extra}


def _state(run) -> str:
    return str(run.state).rsplit(".", 1)[-1].lower()


def test_submit_and_seal_survives_a_killed_driver_and_a_killed_task_process(
        dagbag, airflow_home, zk_connection, zk, spark_local, spark, tmp_path):
    dag = dagbag.get_dag("spark_totals_submit")
    inputs = write_inputs(tmp_path / "in", 2)
    faults = tmp_path / "faults"
    faults.mkdir()

    # Epoch 1: the Spark driver dies (SIGKILL) after writing its data: that try fails with nothing
    # sealed, and the task's retry (a default of the provider's operators) submits again into a new
    # run directory and seals; the dead driver's directory is never sealed and is removed.
    (faults / "epoch-1").write_text("kill_driver")
    # (Epoch 1 runs with no Spark connection: the operator's default, local[*].)
    run = dag.test(run_conf=_conf(tmp_path, 1, inputs, spark_conn=""))
    assert _state(run) == "success"
    assert run.get_task_instance("epoch.totals").try_number == 2
    assert len(list(faults.glob("claimed-1-*"))) == 1  # the first try's driver took the fault, and died
    ledger = EpochLedger(zk, "spark_totals_submit")
    assert ledger.frontier() == 1
    assert run_dirs(tmp_path / "out", "spark_totals_submit", 1) == sealed_runs(ledger, PARTITION, 1)

    # Epoch 2: `kill -9` of the Airflow task process while its Spark job runs.
    release = faults / "release-2"
    (faults / "epoch-2").write_text(f"hold:{release}")
    airflow = str(Path(sys.executable).parent / "airflow")
    conf = json.dumps(_conf(tmp_path, 2, inputs, spark_conn=spark_local))
    log = tmp_path / "killed-task.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([airflow, "dags", "test", "spark_totals_submit", "-c", conf],
                                env={**os.environ, **private_airflow_db(airflow_home, tmp_path / "home")},
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not list(faults.glob("held-2-*")):
        assert proc.poll() is None, log.read_text()[-5000:]
        assert time.monotonic() < deadline, log.read_text()[-5000:]
        time.sleep(0.5)
    held_driver = int(next(faults.glob("held-2-*")).read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert ledger.seal(2, PARTITION) is None
    # The rerun waits for the dead task's partition lock (its session expires), runs, and seals.
    assert _state(dag.test(run_conf=_conf(tmp_path, 2, inputs, spark_conn=spark_local))) == "success"
    assert ledger.frontier() == 2
    # The orphaned driver of the killed task is released and may finish after its successor.
    release.write_text("go")
    deadline = time.monotonic() + 60
    while pid_alive(held_driver) and time.monotonic() < deadline:
        time.sleep(0.5)
    daily, running, _ = sealed_result(spark, ledger, 2)
    assert_matches_pandas(daily, running, inputs, 2)
    sealed = sealed_runs(ledger, PARTITION, 2)
    assert len(sealed) == 1 and not any(faults.glob(f"held-2-{Path(sealed[0]).name[4:]}"))
    history = [(e.event, e.detail.get("epoch")) for e in ledger.history()]
    assert history.count(("partition_sealed", 2)) == 1


def test_out_of_order_submission_is_refused_with_nothing_submitted(dagbag, zk_connection, zk, tmp_path):
    from airflow_epochs.coordination import PipelineConfig

    ledger = EpochLedger(zk, "spark_totals_guard", owner="tests")
    ledger.create_pipeline(PipelineConfig({PARTITION: (PRODUCER,)}))
    ledger.open_epoch(1)
    inputs = write_inputs(tmp_path / "in", 2)
    run = dagbag.get_dag("spark_totals_guard").test(run_conf=_conf(tmp_path, 2, inputs))
    assert _state(run) == "failed"
    assert not (tmp_path / "out").exists()  # the job never ran: it would have created its run directory
    assert not any((tmp_path / "faults").iterdir())
    assert ledger.epoch_info(2) is None and ledger.vote_of(1, PARTITION, PRODUCER) is None


@pytest.fixture
def standalone_cluster(monkeypatch, tmp_path):
    """A Spark standalone master and one worker from the pyspark wheel, on loopback."""
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp_path / "worker"), "SPARK_LOG_DIR": str(tmp_path / "logs")}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(home / "bin" / "spark-class")
    logs = open(tmp_path / "cluster.log", "ab")  # noqa: SIM115 - closed at teardown
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs,
                              stderr=subprocess.STDOUT, start_new_session=True)
    worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                               "--host", "127.0.0.1", "--webui-port", str(worker_ui), "--cores", "2",
                               "--memory", "1g"], env=env, stdout=logs, stderr=subprocess.STDOUT,
                              start_new_session=True)
    deadline = time.monotonic() + 120
    while b"Successfully registered with master" not in (tmp_path / "cluster.log").read_bytes():
        assert time.monotonic() < deadline, (tmp_path / "cluster.log").read_text()[-3000:]
        assert master.poll() is None and worker.poll() is None, (tmp_path / "cluster.log").read_text()[-3000:]
        time.sleep(0.5)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE",
                       json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": port}))
    yield "spark_standalone"
    for proc in (worker, master):
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    logs.close()


def test_submit_and_seal_on_a_standalone_master_and_worker(dagbag, zk_connection, zk, spark, standalone_cluster,
                                                           tmp_path):
    dag = dagbag.get_dag("spark_totals_submit")
    inputs = write_inputs(tmp_path / "in", 1)
    run = dag.test(run_conf=_conf(tmp_path, 1, inputs, spark_conn=standalone_cluster))
    assert _state(run) == "success"
    ledger = EpochLedger(zk, "spark_totals_submit")
    daily, running, _ = sealed_result(spark, ledger, 1)
    assert_matches_pandas(daily, running, inputs, 1)
    log = (tmp_path / "cluster.log").read_text()
    assert "Launching executor" in log or "Asked to launch executor" in log, log[-2000:]


def test_the_spark_connect_path_gives_the_same_sealed_result(dagbag, zk_connection, zk, spark, spark_connect,
                                                             tmp_path):
    dag = dagbag.get_dag("spark_totals_connect")
    epochs = 5
    inputs = write_inputs(tmp_path / "in", epochs)
    for epoch in range(1, epochs + 1):
        run = dag.test(run_conf=_conf(tmp_path, epoch, inputs, connect_conn=spark_connect))
        assert _state(run) == "success", epoch
    ledger = EpochLedger(zk, "spark_totals_connect")
    daily, running, checksums = sealed_result(spark, ledger, epochs)
    assert_matches_pandas(daily, running, inputs, epochs)
    assert len(set(checksums)) == epochs + 1
    # The same job on a local session (in this process) gives the same checksums, output by output.
    reference = run_clean(zk, spark, tmp_path / "reference", inputs, "reference")
    assert sealed_result(spark, reference, epochs)[2] == checksums
