"""Issue 35, item 2: no code from the working folder. A second local user (created and removed by the
test) plants ``airflow_epochs/`` and ``pyspark/`` packages in a shared folder; root then runs our CLI
and our servers from there. Every Python process we start runs isolated (``python -I``) in a folder of
its own, so the planted code never runs (its marker file never appears) while the same plant does run
under a plain ``python -c`` from that folder (the control)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user, shared_folder

from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CLI = str(Path(sys.executable).parent / "airflow-epochs")


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


@pytest.fixture()
def planted(intruder: Intruder) -> Iterator[tuple[Path, Path]]:
    """(the shared folder holding the plant, the marker file the plant writes when it runs)."""
    with shared_folder() as shared:
        marker = shared / "planted-code-ran"
        for package in ("airflow_epochs", "pyspark"):
            intruder.sh(f"mkdir {shared}/{package} && printf '%s\\n' "
                        f"\"open('{marker}', 'a').write('{package}\\\\n')\" > {shared}/{package}/__init__.py")
        yield shared, marker


def test_the_plant_runs_under_a_plain_python_c(planted):
    """The control: what the Spark Connect probe and the launcher did before (``python -c``/``-m``
    from the working folder) imports the planted package."""
    shared, marker = planted
    subprocess.run([sys.executable, "-c", "import airflow_epochs"], cwd=shared, check=False, timeout=60)
    assert marker.read_text() == "airflow_epochs\n"


def test_spark_connect_status_from_a_planted_folder_runs_no_planted_code(planted, spark_connect_server,
                                                                         spark_connect_state):
    shared, marker = planted
    done = subprocess.run([CLI, "--state-dir", str(spark_connect_state), "spark-connect", "status",
                           "--probe-timeout", "240"], cwd=shared, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "answered a query" in done.stdout, done
    assert not marker.exists(), marker.read_text()


def test_a_server_that_dies_with_its_parent_started_from_a_planted_folder_runs_no_planted_code(
        planted, tmp_path, monkeypatch):
    shared, marker = planted
    monkeypatch.chdir(shared)
    with EmbeddedZooKeeper(directory=tmp_path / "zookeeper", port=free_port(), die_with_parent=True) as server:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=server.hosts)
        client.start(timeout=60)
        try:
            assert client.exists("/") is not None
        finally:
            client.stop()
            client.close()
        member = server.members[0]
        assert member.process is not None
        assert Path(f"/proc/{member.process.pid}/cwd").resolve() == member.directory.resolve()
    assert not marker.exists(), marker.read_text()
