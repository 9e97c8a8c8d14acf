"""The embedded ZooKeeper that ``airflow-epochs zookeeper start`` (and the demo) runs is usable only by
our clients, attacked as a second local user (a throw-away account made with ``useradd``; the attacks
speak ZooKeeper's wire protocol with the system's python3, see ``zk_wire.py``):

- without our client certificate (mutual TLS) another user gets no session at all; and behind that,
  without credentials a session can do nothing: no create (the heap flood of 1 MB nodes), no read,
  no listing; with made-up digest credentials it is authenticated but ``/`` and everything we create
  carry only our identity's ACL (shown with our certificate, as if it had leaked);
- while the server is down, a process squatting its port gets no password: our clients speak TLS
  and check the certificate against the CA in our state folder before the digest is sent;
- a flood of idle sockets does not lock our clients out (no per-address connection limit: every local
  client shares 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user, shared_folder
from kazoo.handlers.threading import KazooTimeoutError
from zk_wire import CLIENT, FLOODER, SQUATTER

from airflow_epochs.cli.state import read_state
from airflow_epochs.connection.embedded import client_settings
from airflow_epochs.connection.zookeeper import TlsHandshakeFailed
from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.servers.dev_certificates import generate_dev_certificates
from airflow_epochs.servers.secured_zookeeper import secured_server

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "airflow-epochs")
SYSTEM_PYTHON = "/usr/bin/python3"  # the intruder cannot reach our virtualenv's interpreter
MEGABYTE = 1_000_000  # under ZooKeeper's 1 MiB jute.maxbuffer: a node the server would keep in its heap
NO_AUTH, SESSION_NEEDS_AUTH = -102, -124
# Ten times ZooKeeper's default per-address limit (maxClientCnxns=60), held by one process of the
# intruder: far beyond what locked every task out before, well under the JVM's descriptor limit.
FLOOD = 600


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    base = tmp_path / "state"
    env = {**os.environ, "AIRFLOW_EPOCHS_HOME": str(base)}
    started = subprocess.run([CLI, "zookeeper", "start"], env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    assert "over TLS" in started.stdout  # TLS unless --plaintext
    try:
        yield base
    finally:
        subprocess.run([CLI, "zookeeper", "stop"], env=env, capture_output=True, timeout=60)


def _attack(intruder: Intruder | None, port: int, mode: str, auth: str, *ops: str) -> dict[str, object]:
    """The wire client's answers, run as ``intruder`` (or as us, with None)."""
    argv = [SYSTEM_PYTHON, "-c", CLIENT, "127.0.0.1", str(port), mode, auth, *ops]
    done = (intruder.run(argv, timeout=120) if intruder is not None else
            subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True))
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _sales(base: Path) -> tuple[object, EpochLedger]:
    """Our client, as every command and the demo build it, with a pipeline that has a sealed epoch."""
    client = client_settings(base, read_state(base) or {}).start_client()
    ledger = EpochLedger(client, "sales", owner="etl")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    ledger.vote(ledger.open_epoch(1), "orders", "ingest", {"rows": 7})
    return client, ledger


def test_another_local_user_can_create_read_or_list_nothing(state, intruder):
    recorded = read_state(state) or {}
    client, ledger = _sales(state)
    try:
        frontier = "/airflow-epochs/sales/frontier"
        flood = [f"create:/flood-{i}:{MEGABYTE}" for i in range(3)]
        reads = [f"get:{frontier}", "children:/", "children:/airflow-epochs"]
        assert recorded["port"] == recorded["secure_port"]  # TLS by default: no plaintext port to attack
        # The second user has no certificate of ours: no session, so no request, watch or node at all.
        for auth in ("-", "digest:intruder:guess"):
            refused = _attack(intruder, int(recorded["secure_port"]), "tls", auth, *flood, *reads)
            assert list(refused) == ["connection"] and str(refused["connection"]).startswith("refused"), refused
        # Behind the certificate, the credentials and ACLs (run by us, with our certificate).
        ours = f"tls:{recorded['certfile']}:{recorded['keyfile']}"
        for port, mode in ((recorded["secure_port"], ours),):
            # No credentials: the first request closes the session (enforced authentication).
            anonymous = _attack(None, int(port), mode, "-", *flood[:1], *reads[:1])
            assert anonymous["create:/flood-0"] in (SESSION_NEEDS_AUTH, "closed"), anonymous
            assert anonymous.get(f"get:{frontier}") in (None, SESSION_NEEDS_AUTH, "closed"), anonymous
            # Made-up digest credentials authenticate, and are refused everywhere by the ACLs.
            forged = _attack(None, int(port), mode, "digest:intruder:guess", *flood,
                             f"create:/zookeeper/quota/flood:{MEGABYTE}", f"create:/airflow-epochs/sales/x:{MEGABYTE}",
                             *reads)
            assert forged.pop("auth") == 0
            assert set(forged.values()) == {NO_AUTH}, forged
        # Nothing was written, the pipeline still works for us.
        assert sorted(client.get_children("/")) == ["airflow-epochs", "zookeeper"]
        assert client.get_children("/zookeeper/quota") == []
        assert ledger.frontier() == 1
        ledger.vote(ledger.open_epoch(2), "orders", "ingest", {"rows": 3})
        assert ledger.frontier() == 2
    finally:
        client.stop()
        client.close()
    # Our CLI finds the credentials and the CA itself: no flag, no password in the environment.
    status = subprocess.run([CLI, "--state-dir", str(state), "status", "sales"], capture_output=True, text=True,
                            timeout=120)
    assert status.returncode == 0, status.stderr
    assert "sales" in status.stdout


def test_a_process_squatting_the_port_while_the_server_is_down_gets_no_password(state, intruder, tmp_path):
    running = read_state(state) or {}
    settings = client_settings(state, running, connection_timeout=5)  # what a connection written for it holds
    assert settings.use_tls and settings.password
    client, _ledger = _sales(state)
    client.stop()
    client.close()
    stopped = subprocess.run([CLI, "--state-dir", str(state), "zookeeper", "stop"], capture_output=True, text=True,
                             timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    with shared_folder() as shared:
        # The squatter's certificate comes from a CA of its own, valid for 127.0.0.1.
        rogue = generate_dev_certificates(shared / "rogue")
        os.chmod(shared / "rogue", 0o755)
        os.chmod(rogue.server_keystore, 0o644)
        for mode in ("tls", "plain"):
            extra = [str(rogue.server_keystore)] if mode == "tls" else []
            squatter = intruder.popen([SYSTEM_PYTHON, "-c", SQUATTER, str(running["secure_port"]), mode, *extra, "300"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                assert squatter.stdout is not None
                assert squatter.stdout.readline().decode().strip() == "listening"
                with pytest.raises(TlsHandshakeFailed):
                    settings.start_client(timeout=5)
                # kazoo alone (without our handshake check first) refuses the certificate too.
                bare = settings.client()
                with pytest.raises(KazooTimeoutError):  # it never got a session
                    bare.start(timeout=5)
                bare.stop()
                bare.close()
                out, err = squatter.communicate(b"stop\n", timeout=60)
            finally:
                if squatter.poll() is None:
                    squatter.kill()
                    squatter.wait()
            report = json.loads(out.decode().strip().splitlines()[-1])
            assert report["connections"] >= 2, (mode, report, err)
            received = bytes.fromhex(report["received"])
            assert settings.password.encode() not in received and b"digest" not in received, mode
            if mode == "tls":
                assert report["handshakes"] == 0 and received == b"", report  # refused at the certificate


def test_our_client_connects_while_another_user_holds_a_flood_of_idle_sockets(tmp_path, intruder):
    # With mutual TLS another user's sockets fail their handshake and are dropped, so even ZooKeeper's
    # default per-address limit (60), which the same flood filled before client certificates were
    # required, is not used up; the secured server has no per-address limit anyway.
    for limit in (60, None):
        extra = {} if limit is None else {"max_client_connections": limit}
        with secured_server(tmp_path / f"zk-{limit}", **extra) as server:
            settings = server.client_settings()
            flooder = intruder.popen([SYSTEM_PYTHON, "-c", FLOODER, str(server.secure_port), "tls", str(FLOOD)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                assert flooder.stdout is not None
                ready = flooder.stdout.readline().decode().split()
                assert ready[0] == "ready", ready
                client = settings.start_client(timeout=60)
                try:
                    client.create("/airflow-epochs-probe", b"ours")
                    assert client.get("/airflow-epochs-probe")[0] == b"ours"
                finally:
                    client.stop()
                    client.close()
            finally:
                flooder.communicate(b"done\n", timeout=120)


def test_a_hook_or_command_given_only_the_port_uses_the_servers_credentials(state, monkeypatch):
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    recorded = read_state(state) or {}
    monkeypatch.setenv("AIRFLOW_EPOCHS_HOME", str(state))
    for port in (recorded["port"], recorded["secure_port"]):  # written for either port: TLS to ours
        monkeypatch.setenv("AIRFLOW_CONN_ZK_EMBEDDED", json.dumps({"conn_type": "zookeeper",
                                                                   "host": f"127.0.0.1:{port}"}))
        hook = ZooKeeperHook("zk_embedded")
        try:
            assert hook.settings.login == "airflow-epochs" and hook.settings.use_tls and hook.settings.use_acl
            assert hook.settings.hosts == (f"127.0.0.1:{recorded['secure_port']}",)
            ledger = hook.ledger("sales", owner="etl")
            ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
            assert ledger.frontier() >= 0
        finally:
            hook.close()
    # Another port, or a connection with its own credentials, is left as it was written.
    monkeypatch.setenv("AIRFLOW_CONN_ZK_OTHER", json.dumps({"conn_type": "zookeeper", "host": "127.0.0.1:1"}))
    assert ZooKeeperHook("zk_other").settings.login is None
    monkeypatch.setenv("AIRFLOW_CONN_ZK_OWN", json.dumps({"conn_type": "zookeeper", "login": "etl", "password": "pw",
                                                          "host": f"127.0.0.1:{recorded['secure_port']}"}))
    assert ZooKeeperHook("zk_own").settings.login == "etl"
    # The CLI given only --hosts does the same.
    status = subprocess.run([CLI, "--state-dir", str(state), "history", "sales", "--hosts",
                             f"127.0.0.1:{recorded['port']}"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr


def test_a_trigger_given_only_the_port_uses_the_servers_credentials(state, monkeypatch):
    """The triggerer resolves the connection as the hook does: a deferred task waiting on the embedded
    server through a host-only connection (the quickstart's) connects with its credentials over TLS."""
    import asyncio

    from airflow_epochs.triggers.base import connection_settings

    recorded = read_state(state) or {}
    monkeypatch.setenv("AIRFLOW_EPOCHS_HOME", str(state))
    monkeypatch.setenv("AIRFLOW_CONN_ZK_EMBEDDED", json.dumps({"conn_type": "zookeeper",
                                                               "host": f"127.0.0.1:{recorded['port']}"}))
    settings = asyncio.run(connection_settings("zk_embedded"))
    assert settings.login == "airflow-epochs" and settings.use_tls and settings.use_acl
    assert settings.hosts == (f"127.0.0.1:{recorded['secure_port']}",)
    client = settings.start_client()
    try:
        assert client.exists("/") is not None
    finally:
        client.stop()
        client.close()
    monkeypatch.setenv("AIRFLOW_CONN_ZK_OWN", json.dumps({"conn_type": "zookeeper", "login": "etl", "password": "pw",
                                                          "host": f"127.0.0.1:{recorded['secure_port']}"}))
    assert asyncio.run(connection_settings("zk_own")).login == "etl"


def test_nodes_planted_before_the_lock_are_taken_over_by_our_superuser(tmp_path):
    """Between the first start answering and its lock, ``/`` is ZooKeeper's default. Someone who used that
    window (here: the same data served once without auth) to re-ACL ``/`` and plant a top-level node for
    themselves does not keep them: our identity is the server's superuser, and the lock adopts both."""
    from kazoo.security import make_digest_acl

    from airflow_epochs.connection.credentials import ServerAuth
    from airflow_epochs.connection.zookeeper import ZooKeeperSettings
    from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

    folder = tmp_path / "zk"
    open_server = EmbeddedZooKeeper(directory=folder).start()
    port = open_server.port
    try:
        planter = ZooKeeperSettings.from_fields(host=open_server.hosts, login="planter",
                                                password="planted-password-123").start_client()
        theirs = [make_digest_acl("planter", "planted-password-123", all=True)]
        planter.create("/airflow-epochs", b"", acl=theirs)
        planter.set_acls("/", theirs)
        planter.stop()
        planter.close()
    finally:
        open_server.stop()
    auth = ServerAuth.generate()
    server = EmbeddedZooKeeper(directory=folder, port=port, auth=auth).start()
    try:
        ours = [make_digest_acl(auth.user, auth.password, all=True)]
        client = server.client_settings().start_client()
        try:
            for path in ("/", "/airflow-epochs", "/zookeeper"):
                assert list(client.get_acls(path)[0]) == ours, path
        finally:
            client.stop()
            client.close()
    finally:
        server.stop()
