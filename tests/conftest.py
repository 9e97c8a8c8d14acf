"""Shared fixtures: a real ZooKeeper (one per session, a fresh chroot per test), a 3-node ensemble,
a local SparkSession and real Airflow DAG runs against a temporary AIRFLOW_HOME."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# Airflow reads its configuration when first imported: point it at a throw-away home first.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="airflow-epochs-test-home-"))
_DAGS = _AIRFLOW_HOME / "dags"
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(_DAGS)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_AIRFLOW_HOME / 'airflow.db'}"
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The Airflow processes the tests start share this home: one Fernet key, JWT and API secret for all of
# them (left unset, each process makes up its own and may write it into airflow.cfg first).
from airflow_secrets import deployment_secrets  # noqa: E402

os.environ.update(deployment_secrets())

from built_once import built_once  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from zk_helpers import pid_alive  # noqa: E402
from zk_proxy import LostAnswerProxy  # noqa: E402
from zk_test_ensemble import TestEnsemble  # noqa: E402
from zk_test_server import SharedZooKeeper  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def allowed_table_roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``[epochs] allowed_table_roots`` (closed when unset) for the test run: its temporary folder, where every
    test's warehouse and SQLite catalog live; Airflow processes the tests start inherit it."""
    root = str(tmp_path_factory.getbasetemp().resolve())
    previous = os.environ.get("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS")
    os.environ["AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS"] = root
    yield root
    if previous is None:
        os.environ.pop("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS", None)
    else:
        os.environ["AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS"] = previous


@pytest.fixture(scope="session")
def zk_server() -> Iterator[SharedZooKeeper]:
    """One real standalone ZooKeeper for the whole session, secured as the product's (mutual TLS, digest
    credentials, ``/`` ours alone): connect through ``zk_server.client(chroot)`` and its siblings (see
    tests/helpers/zk_test_server.py); ``zk_server.hosts`` is gone."""
    # Not under pytest's temporary folder: another pytest session of this account removes all but the newest
    # three of those, and this server's state and data must live as long as this session.
    base = Path(tempfile.mkdtemp(prefix="airflow-epochs-tests-zk-"))
    server = SharedZooKeeper(base)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _chroot_name(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"/tests/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_chroot(zk_server: SharedZooKeeper, request: pytest.FixtureRequest) -> str:
    """A fresh, empty chroot for this test, created on the real server."""
    chroot = _chroot_name(request)
    admin = zk_server.client()
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    return chroot


@pytest.fixture
def proxy(zk_server: SharedZooKeeper) -> Iterator[LostAnswerProxy]:
    """A loopback proxy in front of the session's server that can drop the answer of a committed write
    (TLS on both sides, our client certificate required)."""
    p = LostAnswerProxy(zk_server)
    yield p
    p.close()


@pytest.fixture
def lossy(proxy: LostAnswerProxy, zk_chroot: str) -> Iterator[KazooClient]:
    """A client whose connection goes through the proxy (same chroot as the ``zk`` fixture)."""
    client = proxy.client(zk_chroot, timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_factory(zk_server: SharedZooKeeper, zk_chroot: str) -> Iterator[Callable[..., KazooClient]]:
    """Make started kazoo clients on this test's chroot (kazoo keyword arguments, or ``zk_server.client``'s);
    all are closed at teardown."""
    clients: list[KazooClient] = []

    def make(**kwargs: Any) -> KazooClient:
        client = zk_server.client(zk_chroot, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - teardown goes on
            pass


@pytest.fixture
def zk(zk_factory: Callable[..., KazooClient]) -> KazooClient:
    """A started kazoo client confined to this test's chroot."""
    return zk_factory()


@pytest.fixture
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestEnsemble]:
    """A fresh 3-node ensemble on loopback, for fault tests: mutual TLS only, digest credentials, TLS quorum
    (see tests/helpers/zk_test_ensemble.py for its one way in)."""
    cluster = TestEnsemble(tmp_path_factory.mktemp("ensemble"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local SparkSession (local[2], bound to loopback)."""
    import logging

    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown chatter hits closed streams

    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-epochs-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


def _migrated_sqlite(folder: Path) -> Path:
    """A new SQLite metadata database in ``folder`` migrated by Airflow's CLI; returns its file."""
    database = folder / "airflow.db"
    env = {**os.environ, "AIRFLOW_HOME": str(folder), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{database}"}
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, timeout=300, env=env)
    return database


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite metadata database in a temporary AIRFLOW_HOME whose DAGs folder holds the
    project's example DAGs."""
    shutil.copytree(REPO / "dags", _DAGS, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    for dag_file in (REPO / "tests" / "dags").glob("*.py"):
        shutil.copy(dag_file, _DAGS / dag_file.name)
    # The CLI's migration (not initdb): `airflow dags test` in other processes checks for it. Run once
    # for the test run into a database of its own, then copied in (SQLite's backup API: this process's
    # Airflow may already hold the file open); pytest-xdist's workers each get a copy.
    migrated = built_once(tmp_path_factory, "airflow-sqlite", _migrated_sqlite)
    source, copy = sqlite3.connect(migrated), sqlite3.connect(_AIRFLOW_HOME / "airflow.db")
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return _AIRFLOW_HOME  # removed when this process's session ends (pytest_sessionfinish)


@pytest.fixture(scope="session")
def airflow_pg_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped PostgreSQL data folder with Airflow's metadata database migrated once for the test run
    (shared by pytest-xdist's workers); every scheduler-driven test's deployment
    (``AirflowStack(template=...)``) runs its own server on a copy of it."""
    from airflow_stack import migrated_template, postgres_bin

    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    return built_once(tmp_path_factory, "pg-template", migrated_template)


@pytest.fixture
def dagbag(airflow_home: Path):
    """The DAGs folder (the project's example DAGs plus tests/dags), parsed."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_home / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag


@pytest.fixture
def zk_connection(monkeypatch: pytest.MonkeyPatch, zk_server: SharedZooKeeper, zk_chroot: str) -> str:
    """Point the ``zookeeper_default`` Airflow connection at this test's chroot (TLS and credentials)."""
    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", zk_server.connection_json(zk_chroot))
    return zk_chroot


@pytest.fixture(scope="session")
def spark_connect_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI state folder of the session's Spark Connect server (its token is in ``spark-connect/token``)."""
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="session")
def spark_connect_server(spark_connect_state: Path) -> Iterator[int]:
    """A warm Spark Connect server for the session, managed through the CLI: start and status here;
    at the end stop, and check its processes and port are gone."""
    from airflow_epochs.servers.embedded_spark_connect import listening

    cli = [str(Path(sys.executable).parent / "airflow-epochs"), "--state-dir", str(spark_connect_state)]
    started = subprocess.run([*cli, "spark-connect", "start"], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    # The first query warms the server: on a loaded machine it took 39 s, and over 60 s (the status
    # probe's default) with two pytest-xdist workers each starting one and other test runs sharing
    # the 2 cores: this warm-up waits longer. Later status checks keep the default.
    try:
        status = subprocess.run([*cli, "spark-connect", "status", "--probe-timeout", "240"],
                                capture_output=True, text=True, timeout=300)
        assert status.returncode == 0 and "running at sc://localhost:" in status.stdout, status
    except BaseException:  # never leave the started server behind
        subprocess.run([*cli, "spark-connect", "stop"], capture_output=True, timeout=60)
        raise
    port = int(status.stdout.split("sc://localhost:")[1].split()[0])
    pid = int(status.stdout.split("(pid ")[1].split(",")[0])
    yield port
    stopped = subprocess.run([*cli, "spark-connect", "stop"], capture_output=True, text=True, timeout=60)
    assert "Spark Connect stopped" in stopped.stdout
    assert not pid_alive(pid) and not listening(port)
    with socket.socket(socket.AF_INET6) as v6:  # the [::1] address the server held is free again
        v6.bind(("::1", port))
    assert subprocess.run([*cli, "spark-connect", "status"], capture_output=True, timeout=30).returncode == 1


@pytest.fixture
def spark_connect(spark_connect_server: int, spark_connect_state: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An Airflow connection id (``spark_connect_test``) pointing at the session's Spark Connect server,
    with its token as the password (host 127.0.0.1, as users write it: the client names it localhost)."""
    import json

    token = (spark_connect_state / "spark-connect" / "token").read_text().strip()
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST", json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_connect_server, "password": token}))
    return "spark_connect_test"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this process's AIRFLOW_HOME (made at import: one per pytest-xdist worker, one for the
    controller). Last: pytest's own session finish tears down the session fixtures first (and the
    Airflow processes they started, which use the home until then). Not at unconfigure: a pytest-xdist
    worker is shut down once it has reported the session finished, and never gets there."""
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier (its folder). Under pytest-xdist (``scripts/test.sh``), hand out
    the long files first: the system tests, then
    files with a test marked slow, then the rest, each in collection order. Workers take whole files
    (``--dist loadfile``) in this order, so a long file does not start last and end the run alone.
    A run in one process keeps pytest's order."""
    tests = Path(__file__).resolve().parent
    for item in items:  # the tier is the folder: `-m "not integration and not system"` is the unit tier
        tier = item.path.resolve().relative_to(tests).parts[0]
        if tier in ("integration", "system") and not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))
    if not hasattr(config, "workerinput"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        if item.path.resolve().relative_to(tests).parts[0] == "system":
            return 0
        return 1 if item.path in slow_files else 2

    items.sort(key=rank)  # stable: a file's tests keep their order
