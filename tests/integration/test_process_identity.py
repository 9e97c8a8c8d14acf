"""Process control by identity: a stop signals only the process that was started (same pid, start
time, boot and command line); a stale or edited state file gets a clear error and nothing is killed.
Servers started with ``die_with_parent`` stop with the process that started them, even on kill -9."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zk_helpers import pid_alive

from airflow_epochs.process_identity import NotOurProcess, identify, launch_environment, stop_verified
from airflow_epochs.servers.supervision import RunStillActive, ServerRecord, reap_leftover, write_record

CLI = str(Path(sys.executable).parent / "airflow-epochs")


def _sleeper(seconds: int = 120) -> subprocess.Popen[bytes]:
    # Started as our servers are: with a launch nonce in its environment.
    return subprocess.Popen(["sleep", str(seconds)], start_new_session=True, env=launch_environment())


def _gone(proc: subprocess.Popen[bytes], timeout: float = 10) -> bool:
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_identity_names_the_process_and_changes_with_it():
    proc = _sleeper()
    try:
        me = identify(proc.pid)
        assert me is not None and me.pid == proc.pid and me.argv == ("sleep", "120")
        assert me.alive() and identify(proc.pid) == me
        impostor = dataclasses.replace(me, started=str(int(me.started) + 1))
        assert not impostor.alive()
        with pytest.raises(NotOurProcess, match=rf"pid {proc.pid} is not the process that was started"):
            stop_verified(impostor)
        assert proc.poll() is None  # nothing was signalled
        assert stop_verified(me) is True
        assert _gone(proc)
        assert identify(proc.pid) is None and stop_verified(me) is False
    finally:
        proc.kill()
        proc.wait()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRFLOW_EPOCHS_HOME": str(home)}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("server", ["zookeeper", "spark-connect"])
def test_cli_stop_refuses_a_pid_that_is_not_the_server_it_started(tmp_path, server):
    victim = _sleeper()
    try:
        ours = identify(victim.pid)
        assert ours is not None
        # A stale state file: the pid now runs another program (recorded: another command line).
        stale = {**dataclasses.asdict(ours), "argv": ["java", "-cp", "zookeeper.jar", "QuorumPeerMain"]}
        (tmp_path / f"{server}.json").write_text(json.dumps({"pid": victim.pid, "port": 1, "identity": stale}))
        refused = _cli(tmp_path, server, "stop")
        assert refused.returncode == 2, refused
        assert refused.stderr.startswith(f"error: pid {victim.pid} is not the process that was started")
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert victim.poll() is None
        # An old state file with a bare pid: never trusted.
        (tmp_path / f"{server}.json").write_text(json.dumps({"pid": victim.pid, "port": 1}))
        bare = _cli(tmp_path, server, "stop")
        assert bare.returncode == 2 and "no process identity" in bare.stderr, bare
        assert victim.poll() is None
        assert _cli(tmp_path, server, "status").returncode == 1  # a reused pid is not reported as running
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.integration
def test_cli_records_the_zookeeper_identity_and_stops_it(tmp_path):
    started = _cli(tmp_path, "zookeeper", "start")
    assert started.returncode == 0, started.stderr
    state = json.loads((tmp_path / "zookeeper.json").read_text())
    try:
        identity = state["identity"]
        assert identity["pid"] == state["pid"]
        assert "org.apache.zookeeper.server.quorum.QuorumPeerMain" in identity["argv"]
    finally:
        stopped = _cli(tmp_path, "zookeeper", "stop")
    assert stopped.returncode == 0 and "ZooKeeper stopped" in stopped.stdout, stopped
    assert not pid_alive(state["pid"])
    # Only the ports stay, so that the next start serves where connections point (the credentials stay
    # in their own file, zookeeper/credentials.json).
    kept = {"port": state["port"], "secure_port": state["secure_port"]}
    assert json.loads((tmp_path / "zookeeper.json").read_text()) == kept
    again = _cli(tmp_path, "zookeeper", "start")
    try:
        assert again.returncode == 0 and f"127.0.0.1:{state['secure_port']}" in again.stdout, again
        restarted = json.loads((tmp_path / "zookeeper.json").read_text())
        assert {key: restarted[key] for key in kept} == kept
    finally:
        assert _cli(tmp_path, "zookeeper", "stop").returncode == 0


def test_leftover_of_a_killed_run_is_reaped_and_a_live_run_is_left_alone(tmp_path):
    record_path = tmp_path / "servers" / "sleeper.json"
    owner = _sleeper()  # stands in for the run that started the server
    server = _sleeper()
    try:
        owner_id, server_id = identify(owner.pid), identify(server.pid)
        assert owner_id is not None and server_id is not None
        write_record(record_path, ServerRecord("sleeper", server_id, owner_id, group=True, details={"port": 1}))
        assert oct(record_path.stat().st_mode & 0o777) == "0o600"
        with pytest.raises(RunStillActive, match="belongs to a run that is still alive"):
            reap_leftover(record_path)
        assert server.poll() is None and record_path.exists()
        owner.kill()
        owner.wait()
        said = reap_leftover(record_path)
        assert said is not None and said.startswith("stopped the sleeper server left by a run that was killed")
        assert _gone(server) and not record_path.exists()
        assert reap_leftover(record_path) is None
    finally:
        for proc in (owner, server):
            proc.kill()
            proc.wait()


def test_a_server_started_to_die_with_its_parent_dies_on_kill_9(tmp_path):
    """A parent process starts a server with die_with_parent and is killed -9: the server follows."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from airflow_epochs.servers.die_with_parent import launcher\n"
        "child = subprocess.Popen([*launcher(), 'sleep', '120'], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while (found := identify(child)) is None or found.argv[0] != "sleep":  # exec'd into the command
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while identify(child) is not None:
            assert time.monotonic() < deadline, "the child outlived its killed parent"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
