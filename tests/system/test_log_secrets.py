"""Secrets never logged: a real DAG run (``airflow dags test``, logging at DEBUG) with a ZooKeeper digest
password full of quotes and backslashes, a Spark Connect token and a storage URI with credentials;
every line it prints and every task log file is searched for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_pipeline import JOB, write_inputs

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.redaction import redact

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# Each secret carries a marker that must never appear; the quotes and the backslash are what broke the
# old DEBUG redaction (it stopped at an escaped quote and logged the rest).
PASSWORD = "zkpw-PWMARKER-'quoted\"-\\back-end"
URI_SECRET = "URIMARKER-s3cr3t"


def test_no_secret_in_any_log_line(airflow_home, zk_server, zk_chroot, spark_connect, spark_connect_state, tmp_path):
    token = (spark_connect_state / "spark-connect" / "token").read_text().strip()
    inputs = write_inputs(tmp_path / "in", 1)
    faults = tmp_path / "faults"
    faults.mkdir()
    archive = f"s3://AKIAPROBE:{URI_SECRET}@archive-bucket/flights/day=1"
    env = {
        **os.environ,
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "DEBUG",
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(zk_chroot, login="etl", password=PASSWORD,
                                                                    use_acl=True),
        "AIRFLOW_CONN_SPARK_PROBE_LOCAL": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_VAR_SECRETS_PROBE_ARCHIVE": archive,
    }
    conf = {"epoch": 1, "job": str(JOB), "storage": str(tmp_path / "out"), "inputs": str(Path(inputs[1]).parent),
            "faults": str(faults)}
    airflow = str(Path(sys.executable).parent / "airflow")
    run = subprocess.run([airflow, "dags", "test", "secrets_probe", "-c", json.dumps(conf)], env=env,
                         capture_output=True, text=True, timeout=800)
    output = run.stdout + run.stderr
    # The run did what it should, with those very secrets: sealed through the protected connection.
    settings = zk_server.settings(zk_chroot, login="etl", password=PASSWORD)
    client = settings.start_client()
    try:
        assert EpochLedger(client, "secrets_probe").frontier() == 1, output[-5000:]
    finally:
        client.stop()
        client.close()
    assert "Auth(" in output or "auth=" in output  # kazoo's DEBUG log of the auth request was there
    assert "Spark-Submit cmd" in output and "--epoch-context-file" in output  # the command line was logged

    lines = output.splitlines()
    for log_file in (airflow_home / "logs").rglob("*"):
        if log_file.is_file():
            lines += log_file.read_text(errors="replace").splitlines()
    # Left out, and only these: under `dags test`, Airflow's in-process stand-in for the supervisor logs
    # each mask request at DEBUG with its value in quoted form, Airflow's own for the connection password
    # included, before anything can mask it (the real supervisor logs them "body omitted").
    mask_requests = [line for line in lines if "Sending request" in line and "MaskSecret(" in line]
    lines = [line for line in lines if not ("Sending request" in line and "MaskSecret(" in line)]
    secrets = {"password marker": "PWMARKER", "password tail": "back-end", "token": token,
               "URI secret": "URIMARKER", "URI userinfo": "AKIAPROBE:"}
    for what, secret in secrets.items():
        leaks = [line for line in lines if secret in line]
        assert not leaks, f"{what} logged in {len(leaks)} lines, e.g. {leaks[0][:300]}"
    assert len(lines) > 500  # DEBUG output of a whole run was searched, not an empty capture
    assert mask_requests  # the secrets were registered with the masker


def test_the_pattern_fallback_without_airflow():
    """Where no masker runs (the CLI, a plain script), the patterns alone cover kazoo's auth request with
    every quoting Python's repr produces, and URI credentials."""
    for password in (PASSWORD, "plain-PWMARKER", "only'single-PWMARKER", 'only"double-PWMARKER', "b\\-PWMARKER"):
        for value in (f"etl:{password}", f"etl:{password}".encode()):
            line = f"Sending request(xid=None): Auth(auth_type=0, scheme='digest', auth={value!r})"
            assert "PWMARKER" not in redact(line), line
    assert URI_SECRET not in redact(f"reading s3://AKIAPROBE:{URI_SECRET}@bucket/x and more")
    assert "SK-MARK" not in redact("s3://bucket/x?access_key=AK&secret_key=SK-MARK&region=eu")
