"""Issue 35, item 6: an epoch job's Spark driver (SparkEpochHook, spark-submit on the local master)
authenticates its RPC and serves no UI. While the job holds (an injected pause), a throw-away second
local user (created and removed by the test) sends every port the driver listens on a forged
``StopBlockManagerMaster`` and an HTTP GET: the RPC refuses it in its SASL handshake, no port serves a
page, and the job then seals normally. The Spark Connect test of the same attacker is the control that
the message breaks an unauthenticated driver
(``test_a_forged_stop_block_manager_master_from_another_user_is_refused``)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from intruder import second_user, shared_folder
from listening_sockets import listening_addresses
from spark_attacks import HTTP_GET, compile_attack
from spark_pipeline import JOB, PARTITION, PRODUCER, pipeline, write_inputs

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.hooks.spark_epoch import SparkEpochHook

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_the_local_driver_refuses_another_users_forged_rpc_and_serves_no_ui(zk_connection, zk, tmp_path,
                                                                           monkeypatch):
    if shutil.which("javac") is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("javac builds the attacker")
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    ledger = pipeline(zk, "driver_auth")
    inputs = write_inputs(tmp_path / "in", 1)
    faults = tmp_path / "faults"
    faults.mkdir()
    release = tmp_path / "release"
    (faults / "epoch-1").write_text(f"hold:{release}")
    hook = SparkEpochHook(application=str(JOB))
    attempt = ledger.open_epoch(1)
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(hook.submit_and_seal(
        attempt, PARTITION, PRODUCER, storage=str(tmp_path / "out"),
        inputs={"events": inputs[1], "faults": str(faults)})))
    with second_user() as intruder, shared_folder() as shared:
        classpath = compile_attack(shared / "attack")
        runner.start()
        try:
            deadline = time.monotonic() + 600
            while not list(tmp_path.glob("held-1-*")) and runner.is_alive() and time.monotonic() < deadline:
                time.sleep(0.5)
            held = list(tmp_path.glob("held-1-*"))
            assert held, "the job never reached its pause"
            python_driver = int(held[0].read_text())
            driver = _ppid(python_driver)  # the JVM that runs the Python driver
            # No code from the worker's working folder (item 2): the driver works in the private context
            # folder, and its Python (and Python workers') never put their folder first on sys.path.
            for pid in (python_driver, driver):
                assert Path(f"/proc/{pid}/cwd").resolve().name.startswith("airflow-epochs-context-")
            assert b"\0PYTHONSAFEPATH=1\0" in b"\0" + Path(f"/proc/{python_driver}/environ").read_bytes()
            ports = sorted(port for _, port in listening_addresses([driver]))
            assert ports, "the driver listens on nothing?"
            refused_by_sasl = 0
            for port in ports:
                forged = intruder.run(["java", "-cp", classpath, "ForgedStopBlockManagerMaster", str(port)],
                                      check=False, timeout=180, cwd="/")
                assert "REPLY true" not in forged.stdout, (port, forged.stdout)
                refused_by_sasl += "Expected SaslMessage" in forged.stdout
                page = intruder.run(["/usr/bin/python3", "-I", "-c", HTTP_GET, str(port)], check=False, cwd="/")
                assert " 200 " not in page.stdout and " 302 " not in page.stdout, (port, page.stdout)
            assert refused_by_sasl >= 1, "no port refused the forged message in Spark's SASL handshake"
        finally:
            release.write_text("go")
            runner.join(timeout=600)
    assert outcome and outcome[0].action == "ran" and outcome[0].partition_sealed, outcome  # type: ignore[attr-defined]


def test_a_job_cannot_turn_the_ui_on_or_authentication_off():
    with pytest.raises(InvalidInput, match=r"spark\.ui\.enabled"):
        SparkEpochHook.local_driver_conf("local", {"spark.ui.enabled": "true"})
    with pytest.raises(InvalidInput, match=r"spark\.authenticate"):
        SparkEpochHook.local_driver_conf("local", {"spark.authenticate": "false"})
    assert SparkEpochHook.local_driver_conf("local", {"spark.sql.shuffle.partitions": "4"}) == {
        "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", "spark.authenticate": "true"}
    assert SparkEpochHook.local_driver_conf("standalone", None) == {"spark.ui.enabled": "false"}


def test_the_event_log_goes_to_a_folder_of_ours_never_into_another_users_tmp_spark_events(zk_connection, zk,
                                                                                         tmp_path, monkeypatch):
    """Issue 48, item 10: with ``spark.eventLog.enabled=true`` (allowed), the driver wrote its event log into
    Spark's default ``/tmp/spark-events``, which the second user created first, owns and plants links in.
    Now it goes into a folder of ours, created 0700 and checked like a state folder
    (``AIRFLOW_HOME/spark-events`` here): the job seals, its event log is there, and nothing is added to the
    other user's folder."""
    default = Path("/tmp/spark-events")
    aside = default.with_name(f"spark-events.aside-{os.getpid()}")
    if os.path.lexists(default):  # someone's left from before: kept aside, given back below
        default.rename(aside)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    ledger = pipeline(zk, "event_log")
    inputs = write_inputs(tmp_path / "in", 1)
    hook = SparkEpochHook(application=str(JOB), submit_options={"conf": {"spark.eventLog.enabled": "true"}})
    try:
        with second_user() as intruder:
            intruder.run(["mkdir", "-m", "755", str(default)], cwd="/")
            intruder.run(["ln", "-s", "/etc/passwd", str(default / "local-planted")], cwd="/")
            planted = sorted(p.name for p in default.iterdir())
            outcome = hook.submit_and_seal(ledger.open_epoch(1), PARTITION, PRODUCER, storage=str(tmp_path / "out"),
                                           inputs={"events": inputs[1]})
            assert sorted(p.name for p in default.iterdir()) == planted  # nothing of ours in their folder
    finally:
        shutil.rmtree(default, ignore_errors=True)
        if os.path.lexists(aside):
            aside.rename(default)
    assert outcome.action == "ran" and outcome.partition_sealed, outcome
    ours = tmp_path / "airflow" / "spark-events"
    assert ours.stat().st_mode & 0o777 == 0o700 and ours.stat().st_uid == os.geteuid()
    logs = [p for p in ours.rglob("*") if p.is_file() and "local-" in str(p.relative_to(ours))]  # Spark 4 rolls
    assert logs and sum(p.stat().st_size for p in logs) > 0, list(ours.rglob("*"))
