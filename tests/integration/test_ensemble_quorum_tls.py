"""Issue 35 on the production topology's ensemble (``scripts/cluster.sh``): a TLS ensemble's members speak
mutual TLS to each other too (ZooKeeper's ``sslQuorum``), so another local user can neither vote in an
election nor follow the leader and receive its data. As a throw-away second local user: a TLS handshake
with each member's quorum and election ports fails without a certificate and with one of its own making,
while the members' own certificate completes it (the control) and the ensemble elects a leader and
serves our mutual-TLS clients."""

from __future__ import annotations

import subprocess

import pytest
from intruder import second_user, shared_folder

from airflow_epochs.connection.credentials import CREDENTIALS_FILE, TLS_FOLDER
from airflow_epochs.servers.dev_certificates import generate_dev_certificates
from airflow_epochs.servers.embedded_zookeeper import ZooKeeperEnsemble
from airflow_epochs.servers.secured_zookeeper import load_or_create_auth
from airflow_epochs.servers.zookeeper_security import ServerTls, ensure_certificates

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.ensemble, pytest.mark.timeout(300)]

# A TLS handshake with each port given (with the certificate and key given, if any): "OK" or the error.
HANDSHAKE = r"""
import socket, ssl, sys
ports, cert = sys.argv[1].split(","), sys.argv[2:4]
for port in ports:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as raw, ctx.wrap_socket(raw) as s:
            s.settimeout(3)  # TLS 1.3 reports a refused client certificate at the first read
            try:
                data = s.recv(1)
                print(port, "OK" if data else "CLOSED", flush=True)
            except socket.timeout:
                print(port, "OK", flush=True)
    except (OSError, ssl.SSLError) as exc:
        print(port, "ERROR", type(exc).__name__, flush=True)
"""


def test_members_speak_mutual_tls_to_each_other_and_another_user_gets_no_quorum_handshake(tmp_path):
    folder = tmp_path / "zookeeper"
    certificates = ensure_certificates(folder / TLS_FOLDER)
    tls = ServerTls(certificates.server_keystore, certificates.ca, client_auth="need",
                    client_cert=certificates.client_cert, client_key=certificates.client_key)
    with ZooKeeperEnsemble(3, directory=folder, tls=tls, auth=load_or_create_auth(folder / CREDENTIALS_FILE),
                           plaintext_port=False) as ensemble:
        for member in ensemble.members:
            config = member.config_file.read_text()
            assert "sslQuorum=true" in config and "ssl.quorum.keyStore.location=" in config, config
        modes = sorted(str(m.mode()) for m in ensemble.members)
        assert modes == ["follower", "follower", "leader"], modes  # elected over TLS
        client = ensemble.client_settings().start_client(timeout=30)
        try:
            client.ensure_path("/quorum-check")
            assert client.exists("/quorum-check") is not None
        finally:
            client.stop()
            client.close()
        # the leader's quorum port is open only on the leader; every member's election port is
        ports = sorted({m.election_port for m in ensemble.members} | {m.peer_port for m in ensemble.members
                                                                      if m.mode() == "leader"})
        with second_user() as intruder, shared_folder() as shared:
            own = generate_dev_certificates(shared / "own-ca")  # a CA and certificates of the intruder's making
            for path in (shared / "own-ca", own.client_cert, own.client_key):
                path.chmod(0o755 if path.is_dir() else 0o644)
            for cert in ([], [str(own.client_cert), str(own.client_key)]):
                tried = intruder.run(["/usr/bin/python3", "-I", "-c", HANDSHAKE, ",".join(map(str, ports)), *cert],
                                     cwd="/", timeout=120)
                answers = dict(line.split(" ", 1) for line in tried.stdout.splitlines())
                assert set(answers) == {str(p) for p in ports}, tried
                assert all(a.startswith("ERROR") for a in answers.values()), (cert, answers)
        # the control: the members' own certificate (the server's key store) completes the handshake
        keystore = str(certificates.server_keystore)
        done = subprocess.run(["/usr/bin/python3", "-I", "-c", HANDSHAKE, ",".join(map(str, ports)), keystore,
                               keystore], capture_output=True, text=True, timeout=120, cwd="/")
        answers = dict(line.split(" ", 1) for line in done.stdout.splitlines())
        assert set(answers.values()) == {"OK"}, answers
