"""TLS for real: an embedded ZooKeeper (and a 3-node ensemble) serving TLS on a secureClientPort with
generated certificates; host names checked, digest auth over TLS, a wrong CA and a plaintext port
refused with a clear error well within the connect timeout; the hook's test_connection and the CLI
over TLS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError

from airflow_epochs.connection.zookeeper import ConnectionsRefused, TlsHandshakeFailed, ZooKeeperSettings
from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.servers.dev_certificates import generate_dev_certificates
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, ServerTls, ZooKeeperEnsemble

pytestmark = pytest.mark.integration
CLI = str(Path(sys.executable).parent / "airflow-epochs")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return generate_dev_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(certs, tmp_path_factory):
    server = EmbeddedZooKeeper(directory=tmp_path_factory.mktemp("zk-tls"),
                               tls=ServerTls(certs.server_keystore, certs.ca))
    server.start()
    yield server
    server.stop()


def _settings(host: str, **extra) -> ZooKeeperSettings:
    fields = {k: extra.pop(k) for k in ("login", "password") if k in extra}
    return ZooKeeperSettings.from_fields(host=host, extra={"use_tls": True, "connection_timeout": 10, **extra},
                                         **fields)


def test_connects_with_host_name_checking_on(tls_server, certs):
    for name in ("localhost", "127.0.0.1"):
        settings = _settings(f"{name}:{tls_server.secure_port}", ca=str(certs.ca))
        assert settings.check_hostname and settings.verify_certs
        client = settings.start_client()
        try:
            client.ensure_path("/tls")
            assert client.exists("/tls")
        finally:
            client.stop()
            client.close()


def test_a_host_name_not_in_the_certificate_is_refused(tls_server, tmp_path):
    elsewhere = generate_dev_certificates(tmp_path / "elsewhere", names=["zk.invalid"])
    server = EmbeddedZooKeeper(directory=tmp_path / "zk", tls=ServerTls(elsewhere.server_keystore, elsewhere.ca))
    with server:
        started = time.monotonic()
        with pytest.raises(TlsHandshakeFailed, match=r"certificate refused: IP address mismatch.*'127\.0\.0\.1'"):
            _settings(f"127.0.0.1:{server.secure_port}", ca=str(elsewhere.ca)).start_client()
        assert time.monotonic() - started < 5
        # With host name checking turned off (explicitly), the same certificate is accepted.
        client = _settings(f"127.0.0.1:{server.secure_port}", ca=str(elsewhere.ca),
                           check_hostname=False).start_client()
        client.stop()
        client.close()


def test_a_wrong_ca_is_a_clear_error_within_the_connect_timeout(tls_server, tmp_path):
    other = generate_dev_certificates(tmp_path / "other", ca_name="some other CA")
    started = time.monotonic()
    refused = r"certificate refused: (unable to get local issuer|self-signed certificate in certificate chain)"
    with pytest.raises(TlsHandshakeFailed, match=refused):
        _settings(f"localhost:{tls_server.secure_port}", ca=str(other.ca)).start_client()
    assert time.monotonic() - started < 5  # the connect timeout is 10 s; kazoo alone says only "time-out"
    with pytest.raises(TlsHandshakeFailed, match="does the server serve TLS on this port"):
        _settings(f"localhost:{tls_server.port}", ca=str(other.ca)).start_client()


def test_a_used_up_per_address_limit_is_named_not_blamed_on_tls(certs, tmp_path):
    """At its per-address limit the server closes each new connection before the TLS handshake: the
    error names that limit (maxClientCnxns), not a certificate or a port without TLS."""
    import socket

    server = EmbeddedZooKeeper(directory=tmp_path / "zk", tls=ServerTls(certs.server_keystore, certs.ca),
                               max_client_connections=3)
    with server:
        settings = _settings(f"localhost:{server.secure_port}", ca=str(certs.ca))
        # ZooKeeper counts a TLS connection once its handshake is done: these hold every slot.
        context = settings.ssl_context()
        idle = [context.wrap_socket(socket.create_connection(("127.0.0.1", server.secure_port), timeout=10),
                                    server_hostname="localhost") for _ in range(3)]
        try:
            with pytest.raises(ConnectionsRefused, match=r"closed the connection before the TLS handshake.*"
                                                         r"per-address connection limit \(maxClientCnxns\)"):
                settings.start_client()
        finally:
            for sock in idle:
                sock.close()
        client = settings.start_client()  # the limit freed: the same settings connect
        client.stop()
        client.close()


def test_digest_auth_and_acls_over_tls(tls_server, certs):
    owner = _settings(f"localhost:{tls_server.secure_port}/digest", ca=str(certs.ca), login="etl",
                      password="pw-over-tls").start_client
    anonymous_settings = _settings(f"localhost:{tls_server.secure_port}", ca=str(certs.ca))
    admin = anonymous_settings.start_client()
    admin.ensure_path("/digest")
    client = owner()
    try:
        ledger = EpochLedger(client, "sales", owner="etl")
        ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
        with pytest.raises(NoAuthError):
            admin.set("/digest/airflow-epochs/sales/frontier", b"forged")
    finally:
        for c in (client, admin):
            c.stop()
            c.close()


def test_hook_test_connection_over_tls(tls_server, certs, tmp_path, monkeypatch, airflow_home):
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    monkeypatch.setenv("AIRFLOW_CONN_ZK_TLS", json.dumps({
        "conn_type": "zookeeper", "host": f"localhost:{tls_server.secure_port}", "login": "etl",
        "password": "pw-over-tls", "extra": {"use_tls": True, "ca": str(certs.ca)}}))
    ok, message = ZooKeeperHook("zk_tls").test_connection()
    assert ok, message
    assert "ZooKeeper 3.9" in message and "TLS" in message and "pw-over-tls" not in message

    other = generate_dev_certificates(tmp_path / "other", ca_name="another CA")
    monkeypatch.setenv("AIRFLOW_CONN_ZK_TLS_BAD", json.dumps({
        "conn_type": "zookeeper", "host": f"localhost:{tls_server.secure_port}",
        "extra": {"use_tls": True, "ca": str(other.ca), "connection_timeout": 10}}))
    started = time.monotonic()
    ok, message = ZooKeeperHook("zk_tls_bad").test_connection()
    assert not ok and "TLS handshake refused" in message and time.monotonic() - started < 5


def test_cli_reads_a_protected_pipeline_over_tls_and_says_what_is_missing(tls_server, certs):
    settings = _settings(f"localhost:{tls_server.secure_port}/cli", ca=str(certs.ca), login="etl",
                         password="pw-cli-tls")
    admin = _settings(f"localhost:{tls_server.secure_port}", ca=str(certs.ca)).start_client()
    admin.ensure_path("/cli")
    admin.stop()
    admin.close()
    client = settings.start_client()
    try:
        ledger = EpochLedger(client, "sales", owner="etl")
        ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
        ledger.vote(ledger.open_epoch(1), "orders", "ingest", {"rows": 1})
    finally:
        client.stop()
        client.close()
    base = [CLI, "history", "sales", "--hosts", f"localhost:{tls_server.secure_port}/cli", "--tls", "--ca",
            str(certs.ca), "--connect-timeout", "10"]
    env = {**os.environ, "AIRFLOW_EPOCHS_ZK_PASSWORD": "pw-cli-tls"}
    ok = subprocess.run([*base, "--digest-user", "etl"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "epoch_sealed" in ok.stdout
    for argv, environ, expected in (
        (base, env, f"ZooKeeper refused access (NoAuth) on pipeline 'sales': --hosts localhost:{tls_server.secure_port}"
                    "/cli carries no credentials and the pipeline is protected by an ACL; give them"),
        ([*base, "--digest-user", "etl"], {k: v for k, v in env.items() if k != "AIRFLOW_EPOCHS_ZK_PASSWORD"},
         "needs its password in $AIRFLOW_EPOCHS_ZK_PASSWORD"),
    ):
        failed = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60)
        assert failed.returncode == 2 and expected in failed.stderr, failed
        assert len(failed.stderr.strip().splitlines()) == 1 and "Traceback" not in failed.stderr


@pytest.mark.ensemble
def test_the_ensemble_serves_tls_on_every_member(certs, tmp_path):
    with ZooKeeperEnsemble(3, directory=tmp_path / "ens", tls=ServerTls(certs.server_keystore, certs.ca)) as cluster:
        assert cluster.secure_hosts.count(",") == 2
        for index in range(3):
            port = cluster.members[index].secure_port
            client = _settings(f"localhost:{port}", ca=str(certs.ca)).start_client()
            try:
                client.ensure_path(f"/member-{index}")
            finally:
                client.stop()
                client.close()
        client = _settings(cluster.secure_hosts, ca=str(certs.ca)).start_client()
        try:
            assert sorted(client.get_children("/"))[:3] == ["member-0", "member-1", "member-2"]
        finally:
            client.stop()
            client.close()
