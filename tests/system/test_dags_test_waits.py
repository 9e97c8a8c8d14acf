"""``airflow dags test`` on a deferrable sensor whose pipeline name is a typo, as a newcomer runs it: the
connection comes from the metadata database (``airflow connections add``), the wait says at once that
the pipeline does not exist (naming the ones that do), the sensor's timeout applies to the inline trigger,
and SIGTERM ends the run instead of being swallowed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from airflow_db import private_airflow_db

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

BIN = Path(sys.executable).parent


def test_a_typo_under_airflow_dags_test_is_said_times_out_and_stops_on_sigterm(airflow_home, zk_server, zk_chroot,
                                                                             tmp_path):
    client = zk_server.client(zk_chroot)
    try:
        EpochLedger(client, "nycflights", owner="etl").create_pipeline(PipelineConfig({"daily": ("join",)}))
    finally:
        client.stop()
        client.close()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")},
           **private_airflow_db(airflow_home, tmp_path / "db"), "AIRFLOW_EPOCHS_HOME": str(zk_server.base)}
    added = subprocess.run([str(BIN / "airflow"), "connections", "add", "zookeeper_default", "--conn-type",
                            "zookeeper", "--conn-host", zk_server.address, "--conn-schema", zk_chroot], env=env,
                           capture_output=True, text=True, timeout=180)
    assert added.returncode == 0, added.stderr[-2000:]
    log = tmp_path / "dags-test.log"
    with open(log, "wb") as out:
        run = subprocess.Popen([str(BIN / "airflow"), "dags", "test", "wait_on_a_typo"], env=env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        said = "still waiting for partition(s) daily of pipeline 'nycflight' at epoch 1: pipeline 'nycflight' " \
               "does not exist under /airflow-epochs (pipelines there: nycflights)"
        # The long wait has started (its own notice, after the short one's timeout): then SIGTERM.
        while log.read_text(errors="replace").count(said) < 2:
            assert run.poll() is None, log.read_text(errors="replace")[-5000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-5000:]
            time.sleep(1)
        text = log.read_text(errors="replace")
        assert "isn't defined" not in text  # the inline trigger found the connection in the database
        assert "short: timed out after 15 s waiting for partition(s) daily of pipeline 'nycflight'" in text
        # the worker's own check said it before deferring, naming the pipelines that do exist
        assert "but pipeline 'nycflight' does not exist under /airflow-epochs (pipelines there: nycflights)" in text
        os.kill(run.pid, signal.SIGTERM)
        stopped = time.monotonic()
        run.wait(120)
        assert time.monotonic() - stopped < 60
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
    text = log.read_text(errors="replace")
    assert "terminated (SIGTERM) while waiting" in text, text[-3000:]
    assert run.returncode != 0
