"""The embedded ZooKeeper: a real server and a real 3-node ensemble, started and stopped here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_epochs.servers.embedded_zookeeper import (
    EmbeddedZooKeeper,
    four_letter_word,
)


@pytest.mark.integration
def test_single_server_starts_serves_and_stops(tmp_path):
    server = EmbeddedZooKeeper(directory=tmp_path / "zk")
    server.start()
    try:
        client = KazooClient(hosts=server.hosts)
        client.start(timeout=10)
        assert four_letter_word(server.port, "srvr").startswith("Zookeeper version: 3.9")
        assert "zk_znode_count" in four_letter_word(server.port, "mntr")
        # Only the words the project uses: envi and conf would tell any local user paths and environment.
        for word in ("envi", "conf", "stat", "isro", "ruok", "dump", "wchp"):
            assert "not in the whitelist" in four_letter_word(server.port, word), word
        client.create("/hello", b"world")
        client.stop()
    finally:
        server.stop()
    assert four_letter_word(server.port) == ""
    assert not server.members[0].running()
    # data survives a restart in the same folder: the demo relies on it to resume
    again = EmbeddedZooKeeper(directory=tmp_path / "zk", port=server.port)
    with again:
        client = KazooClient(hosts=again.hosts)
        client.start(timeout=10)
        assert client.get("/hello")[0] == b"world"
        client.stop()










@pytest.mark.integration
def test_chroots_isolate_tests(zk_server):
    root = zk_server.client(start_timeout=10)
    root.ensure_path("/iso-a")  # before the chrooted clients start: kazoo warns about a missing chroot
    root.ensure_path("/iso-b")
    a = zk_server.client("/iso-a")
    b = zk_server.client("/iso-b")
    try:
        a.create("/only-in-a", b"1")
        assert not b.exists("/only-in-a")
        assert root.exists("/iso-a/only-in-a")
    finally:
        for client in (a, b, root):
            client.stop()


def _write_eventually(client, path, data, timeout=30):
    """Write as an application would across a failover: retry on connection loss; a create that did
    commit before the loss is found on the retry."""
    from kazoo.exceptions import ConnectionLoss, NodeExistsError, SessionExpiredError

    deadline = time.monotonic() + timeout
    while True:
        try:
            client.create(path, data)
            return
        except NodeExistsError:
            assert client.get(path)[0] == data
            return
        except (ConnectionLoss, SessionExpiredError):
            assert time.monotonic() < deadline, f"could not write {path} within {timeout} s"
            time.sleep(0.2)


@pytest.mark.integration
@pytest.mark.ensemble
def test_ensemble_survives_member_and_leader_kill(ensemble):
    client = ensemble.client(timeout=10, start_timeout=15)
    try:
        _write_eventually(client, "/before", b"0")
        follower = ensemble.followers()[0]
        ensemble.kill(follower)
        _write_eventually(client, "/after-follower-kill", b"1")
        ensemble.restart(follower)
        leader = ensemble.leader()
        assert leader is not None
        ensemble.kill(leader)
        _write_eventually(client, "/after-leader-kill", b"2")  # survivors elect a leader; kazoo reconnects
        new_leader = ensemble.leader()
        assert new_leader is not None and new_leader != leader
        ensemble.restart(leader)
        assert {client.get(p)[0] for p in ("/before", "/after-follower-kill", "/after-leader-kill")} == {
            b"0", b"1", b"2"}
        assert ensemble.members[leader].mode() == "follower"
    finally:
        client.stop()


@pytest.mark.integration
def test_cli_start_status_stop(tmp_path):
    cli = str(Path(sys.executable).parent / "airflow-epochs")
    env = {**os.environ, "AIRFLOW_EPOCHS_HOME": str(tmp_path)}

    def run(*args):
        return subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=120)

    assert run("zookeeper", "status").returncode == 1
    started = run("zookeeper", "start")
    assert started.returncode == 0, started.stderr
    assert "ZooKeeper started at 127.0.0.1:" in started.stdout
    try:
        again = run("zookeeper", "start")
        assert "already running" in again.stdout
        status = run("zookeeper", "status")
        assert status.returncode == 0 and "mode standalone" in status.stdout
    finally:
        stopped = run("zookeeper", "stop")
    assert "ZooKeeper stopped" in stopped.stdout
    assert run("zookeeper", "status").returncode == 1
    assert shutil.which("java")
