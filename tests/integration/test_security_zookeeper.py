"""Secure by default on a real ZooKeeper: a subtree others can write is refused (and repaired by the
CLI), the embedded server's files are 0700/0600, bad roots are refused before any write, IPv6 hosts
work."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl
from zk_helpers import tree

from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.coordination import EpochLedger, InsecureAcl, InvalidInput, PipelineConfig
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

pytestmark = pytest.mark.integration

CONFIG = PipelineConfig({"orders": ("ingest",)})
CLI = str(Path(sys.executable).parent / "airflow-epochs")


def _owner(zk_server, chroot, user="etl", password="pw-etl-Secret1"):
    """A client as the hook builds it from a connection with a login and a password (use_acl by default)."""
    settings = zk_server.settings(chroot, login=user, password=password, use_acl=True)
    return settings.start_client()


def test_a_world_writable_subtree_created_first_is_refused_then_repaired(zk_server, zk_chroot, zk):
    owner = _owner(zk_server, zk_chroot)
    try:
        # Someone without credentials creates the pipeline first, with a forged configuration.
        EpochLedger(zk, "sales", owner="intruder").create_pipeline(PipelineConfig({"orders": ("forger",)}))
        before = tree(zk)
        with pytest.raises(InsecureAcl, match=r"/airflow-epochs/sales can be written by world:anyone:cdrwa") as err:
            EpochLedger(owner, "sales", owner="etl").create_pipeline(CONFIG)
        assert err.value.path == "/airflow-epochs/sales" and "world:anyone:cdrwa" in err.value.acl
        assert "airflow-epochs acl repair sales" in str(err.value)
        assert tree(zk) == before  # refused before anything was written

        env = {**os.environ, "AIRFLOW_EPOCHS_ZK_PASSWORD": "pw-etl-Secret1"}
        cli = [CLI, "acl", "check", "sales", *zk_server.cli_args(zk_chroot, login="etl")]
        check = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=60)
        assert check.returncode == 2 and "can be written by world:anyone:cdrwa" in check.stderr, check
        assert len(check.stderr.strip().splitlines()) == 1 and "Traceback" not in check.stderr
        cli[2] = "repair"
        repaired = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=60)
        assert repaired.returncode == 0, repaired.stderr
        assert "ACL set on" in repaired.stdout and "history" in repaired.stdout
        # Now only the owner's credentials can write anywhere in the subtree, forged nodes included.
        stranger = zk_server.client(zk_chroot, login="stranger", password="pw-stranger")
        for path in tree(owner, "/airflow-epochs/sales"):
            with pytest.raises(NoAuthError):
                stranger.set(path, b"forged")
        stranger.stop()
        EpochLedger(owner, "sales", owner="etl").create_pipeline(CONFIG)  # accepted now
        cli[2] = "check"
        assert subprocess.run(cli, env=env, capture_output=True, timeout=60).returncode == 0
    finally:
        owner.stop()
        owner.close()


def test_a_pipeline_created_with_credentials_is_protected_and_accepted_again(zk_server, zk_chroot, zk):
    owner = _owner(zk_server, zk_chroot)
    try:
        ledger = EpochLedger(owner, "sales", owner="etl")
        ledger.create_pipeline(CONFIG)
        ledger.create_pipeline(CONFIG)  # opening it again: the check passes on our own ACLs
        ledger.vote(ledger.open_epoch(1), "orders", "ingest", {"rows": 1})
        stranger = zk_server.client(zk_chroot, login="stranger", password="pw-stranger")  # not the owner, nor us
        for path in ("/airflow-epochs/sales", "/airflow-epochs/sales/frontier", "/airflow-epochs/sales/history"):
            with pytest.raises(NoAuthError):
                stranger.set(path, b"forged")
            with pytest.raises(NoAuthError):
                stranger.create(f"{path}/forged")
        stranger.stop()
        assert ledger.frontier() == 1
    finally:
        owner.stop()
        owner.close()


def test_a_subtree_of_another_identity_is_refused_and_a_partly_open_one_too(zk_server, zk_chroot, zk):
    owner = _owner(zk_server, zk_chroot)
    other = _owner(zk_server, zk_chroot, user="someone", password="pw-other-2")
    try:
        # (Under its own root: a root node belongs to whoever created it first, with that one's ACL.)
        EpochLedger(other, "theirs", owner="someone", root="/other-root").create_pipeline(CONFIG)
        with pytest.raises(InsecureAcl, match="cannot be read with this connection's credentials"):
            EpochLedger(owner, "theirs", owner="etl", root="/other-root").create_pipeline(CONFIG)
        # Ours, except one node someone opened (world may read, but also write): refused, naming that node.
        EpochLedger(owner, "mixed", owner="etl").create_pipeline(CONFIG)
        owner.set_acls("/airflow-epochs/mixed/frontier",
                       [make_digest_acl("etl", "pw-etl-Secret1", all=True), make_digest_acl("someone", "x",
                                                                                            write=True)])
        with pytest.raises(InsecureAcl, match=r"/airflow-epochs/mixed/frontier can be written by digest:someone:w"):
            EpochLedger(owner, "mixed", owner="etl").create_pipeline(CONFIG)
        # World-readable is a choice, not a hole.
        owner.set_acls("/airflow-epochs/mixed/frontier",
                       [make_digest_acl("etl", "pw-etl-Secret1", all=True), _world_read()])
        EpochLedger(owner, "mixed", owner="etl").create_pipeline(CONFIG)
    finally:
        for client in (owner, other):
            client.stop()
            client.close()


def _world_read():
    from kazoo.security import ACL, Id, Permissions

    return ACL(Permissions.READ, Id("world", "anyone"))


def test_without_credentials_nothing_is_checked(zk):
    EpochLedger(zk, "open", owner="a").create_pipeline(CONFIG)
    EpochLedger(zk, "open", owner="b").create_pipeline(CONFIG)  # no credentials: nothing to verify against


@pytest.mark.parametrize("root", ["/zookeeper", "/zookeeper/quota", "relative", "/", "/a/", "/a//b", "/a/../b",
                                  "/a/./b", "/bad root", "/nul\x00", 42])
def test_bad_roots_are_refused_before_any_write(zk, root):
    before = tree(zk)
    with pytest.raises(InvalidInput, match="root"):
        EpochLedger(zk, "p", root=root).create_pipeline(CONFIG)
    assert tree(zk) == before


def _modes(folder: Path) -> dict[str, int]:
    found = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(base, name)
            found[path] = os.stat(path).st_mode & 0o777
    return found


def test_embedded_server_and_cli_state_are_private(tmp_path):
    # A folder left 0755 with a 0644 file by an earlier version is tightened on start.
    (tmp_path / "zk" / "member-1").mkdir(parents=True)
    (tmp_path / "zk" / "member-1" / "old.log").write_text("x")
    os.chmod(tmp_path / "zk", 0o755)
    with EmbeddedZooKeeper(directory=tmp_path / "zk") as server:
        client = KazooClient(hosts=server.hosts)
        client.start(timeout=10)
        client.create("/secret", b"what the ACLs protect")
        client.stop()
        client.close()
        modes = _modes(tmp_path / "zk")
    assert os.stat(tmp_path / "zk").st_mode & 0o777 == 0o700
    assert any("version-2/log." in p for p in modes) and any(p.endswith("zoo.cfg") for p in modes)
    for path, mode in modes.items():
        assert mode == (0o700 if os.path.isdir(path) else 0o600), (path, oct(mode))

    state = tmp_path / "state"
    env = {**os.environ, "AIRFLOW_EPOCHS_HOME": str(state)}
    started = subprocess.run([CLI, "zookeeper", "start"], env=env, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        assert os.stat(state).st_mode & 0o777 == 0o700
        for path, mode in _modes(state).items():
            assert mode == (0o700 if os.path.isdir(path) else 0o600), (path, oct(mode))
    finally:
        subprocess.run([CLI, "zookeeper", "stop"], env=env, capture_output=True, timeout=60)


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_ipv6_hosts(tmp_path):
    with EmbeddedZooKeeper(directory=tmp_path / "zk", address="::1") as server:
        assert server.hosts == f"[::1]:{server.port}"
        for host, port in ((f"[::1]:{server.port}", None), ("::1", server.port), ("[::1]", server.port)):
            settings = ZooKeeperSettings.from_fields(host=host, port=port)
            assert settings.hosts == (f"[::1]:{server.port}",)
            client = settings.start_client(timeout=10)
            try:
                client.ensure_path("/v6")
                assert client.exists("/v6")
            finally:
                client.stop()
                client.close()
        assert ZooKeeperSettings.from_fields(host="[::1]:2181,zk2/app").connect_string == "[::1]:2181,zk2:2181/app"
