"""``airflow-epochs ... --conn-id``: a connection made with ``airflow connections add`` (in Airflow's
metadata database, as the quickstart makes it) is found, not only one in an ``AIRFLOW_CONN_*`` variable."""

from __future__ import annotations

import json
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


def test_table_and_spark_connect_commands_read_connections_from_the_metadata_database(
        airflow_home, zk_server, zk_chroot, tmp_path):
    """``table ... --conn-id`` (the catalog), ``table cut --zookeeper-conn-id`` and ``spark-connect start
    --conn-id`` find connections that only the metadata database holds."""
    # A connection that names only the host: the CLI finds the server's credentials in its state folder.
    env = {**private_airflow_db(airflow_home, tmp_path / "db"), "AIRFLOW_EPOCHS_HOME": str(zk_server.base)}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}, **env}
    extra = {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "wh").as_uri()}
    connections = {
        "ice_in_db": {"conn_type": "iceberg", "extra": json.dumps(extra)},
        "zk_in_db": {"conn_type": "zookeeper", "host": zk_server.address, "schema": zk_chroot},
        # a token too short to use: refused by the command before any server starts, once it is found
        "sc_in_db": {"conn_type": "spark_connect", "host": "localhost", "password": "short;tok"},
    }
    (tmp_path / "connections.json").write_text(json.dumps(connections))
    imported = subprocess.run([str(BIN / "airflow"), "connections", "import", str(tmp_path / "connections.json")],
                              env=env, capture_output=True, text=True, timeout=180)
    assert imported.returncode == 0, imported.stderr[-2000:]

    def epochs(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "airflow-epochs"), *argv], env=env, capture_output=True, text=True,
                              timeout=180)

    # The catalog is found and opened (it made its tables); the table is not there.
    read = epochs("table", "read", "ns.daily", "--as-of-epoch", "1", "--conn-id", "ice_in_db")
    assert read.returncode == 2 and "no table 'ns.daily' in the catalog" in read.stderr, read.stderr[-2000:]
    assert (tmp_path / "catalog.db").is_file()
    # The cut reaches ZooKeeper through the connection in the database, then finds no table.
    cut = epochs("table", "cut", "ns.daily", "--as-of-epoch", "1", "--conn-id", "ice_in_db",
                 "--zookeeper-conn-id", "zk_in_db")
    assert cut.returncode == 2 and "no table 'ns.daily' in the catalog" in cut.stderr, cut.stderr[-2000:]
    missing = epochs("table", "cut", "ns.daily", "--as-of-epoch", "1", "--conn-id", "ice_in_db",
                     "--zookeeper-conn-id", "zk_nowhere")
    assert missing.returncode == 2 and "cannot read connection 'zk_nowhere'" in missing.stderr, missing.stderr
    # spark-connect start takes its token from the connection in the database (and refuses this one).
    token = epochs("spark-connect", "start", "--conn-id", "sc_in_db")
    assert token.returncode == 2, token.stderr[-2000:]
    assert "a Spark Connect token needs at least 16 printable characters" in token.stderr
    assert "short;tok" not in token.stderr
