"""``airflow-epochs ... --conn-id``: a connection made with ``airflow connections add`` (in Airflow's
metadata database, as the quickstart makes it) is found, not only one in an ``AIRFLOW_CONN_*`` variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow_db import private_airflow_db

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def test_status_reads_a_connection_from_the_metadata_database(airflow_home, zk_server, zk_chroot, tmp_path):
    client = zk_server.client(zk_chroot)
    try:
        ledger = EpochLedger(client, "sales", owner="etl")
        ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
        ledger.vote(ledger.open_epoch(1), "orders", "ingest", {"rows": 7})
    finally:
        client.stop()
        client.close()
    # A connection that names only the host: the CLI finds the server's credentials in its state folder.
    env = {**private_airflow_db(airflow_home, tmp_path / "db"), "AIRFLOW_EPOCHS_HOME": str(zk_server.base)}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}, **env}
    added = subprocess.run([str(BIN / "airflow"), "connections", "add", "zk_in_db", "--conn-type", "zookeeper",
                            "--conn-host", zk_server.address, "--conn-schema", zk_chroot], env=env, capture_output=True,
                           text=True, timeout=180)
    assert added.returncode == 0, added.stderr[-2000:]
    status = subprocess.run([str(BIN / "airflow-epochs"), "status", "sales", "--conn-id", "zk_in_db"], env=env,
                            capture_output=True, text=True, timeout=180)
    assert status.returncode == 0, status.stderr[-2000:]
    assert "pipeline sales: frontier 1;" in status.stdout
    missing = subprocess.run([str(BIN / "airflow-epochs"), "status", "sales", "--conn-id", "zk_nowhere"], env=env,
                             capture_output=True, text=True, timeout=180)
    assert missing.returncode == 2 and "cannot read connection 'zk_nowhere'" in missing.stderr
