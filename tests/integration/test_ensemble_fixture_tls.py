"""Issue 35 on the fault tests' 3-node ensemble (the ``ensemble`` fixture): it serves mutual TLS only, as the
tests' shared server and the cluster topology's ensemble do. As a throw-away second local user, a
ConnectRequest on every member's one client port gets no ZooKeeper answer, without a certificate and with
one of its own CA; our certificate's gets the answer (the control); no member serves a plaintext client
port; the old plaintext idiom fails naming the new one."""

from __future__ import annotations

import os
import subprocess

import pytest
from intruder import second_user, shared_folder
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from zk_attacks import ATTACK, attack

from airflow_epochs.servers.dev_certificates import generate_dev_certificates

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.ensemble, pytest.mark.timeout(300)]


def test_another_user_gets_no_session_on_any_member_and_our_certificate_does(ensemble):
    """Each attack is bounded (10 ConnectRequests, 30 s) and runs as the second user, which cannot read our key."""
    ports = ensemble.ports
    assert len(ports) == 3
    for member in ensemble.members:
        config = member.config_file.read_text()
        assert "clientPort=" not in config and f"secureClientPort={member.client_port}" in config, config
        assert "ssl.clientAuth=need" in config and "sslQuorum=true" in config, config
    with second_user() as intruder, shared_folder() as shared:
        stolen = intruder.run(["cat", str(ensemble.certificates.client_key)], check=False, cwd="/")
        assert stolen.returncode != 0 and "PRIVATE KEY" not in stolen.stdout  # our key stays ours
        own = generate_dev_certificates(shared / "own-ca")  # a CA and certificates of the intruder's making
        for path in (shared / "own-ca", own.client_cert, own.client_key):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        for port in ports:
            assert attack(intruder, port, 10, watches=10, seconds=30) == (10, 0), port
            assert attack(intruder, port, 10, cert=[str(own.client_cert), str(own.client_key)], watches=10,
                          seconds=30) == (10, 0), port
    # the control, as us: the same ConnectRequest with our certificate gets ZooKeeper's answer on every member
    files = ensemble.tls.client_files()
    for port in ports:
        done = subprocess.run(["/usr/bin/python3", "-I", "-c", ATTACK, str(port), "1", "30", "10", files["certfile"],
                               files["keyfile"]], capture_output=True, text=True, timeout=90, cwd="/")
        assert done.stdout.split()[3] == "1", (port, done)
    # and our client works on each member alone
    for index in range(3):
        client = ensemble.member(index).client(timeout=10)
        try:
            client.ensure_path(f"/member-{index}")
        finally:
            client.stop()
            client.close()
    # the old plaintext idiom fails naming the new one
    with pytest.raises(AttributeError, match=r"ensemble\.client\(chroot"):
        ensemble.hosts  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError, match=r"ensemble\.member\(index\)"):
        ensemble.member_hosts(0)
    plain = KazooClient(hosts=ensemble.address([0]), timeout=5)  # no TLS: the member's one port wants it
    try:
        with pytest.raises(KazooTimeoutError):
            plain.start(timeout=5)
    finally:
        plain.stop()
        plain.close()
