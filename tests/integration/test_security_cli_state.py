"""The CLI's embedded ZooKeeper on a real server: two starts at once on one state folder give one server
(an exclusive lock, a 0600 file of ours, held for the whole start), and the CLI keeps its credentials
and CA where the demo's server does (``zookeeper/credentials.json``, ``zookeeper/tls/``), moving those
an earlier version kept in the state file and ``zookeeper-tls/`` so an existing folder keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from listening_sockets import listening_addresses

from airflow_epochs.cli.state import read_state
from airflow_epochs.connection.embedded import client_settings
from airflow_epochs.private_files import StateLocked, UnsafeState, exclusive_lock, private_dir

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "airflow-epochs")


def _cli(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--state-dir", str(base), *args], capture_output=True, text=True, timeout=300)


def _servers_on(data: Path) -> list[int]:
    """The pids of the ZooKeeper JVMs whose configuration lies in ``data``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.zookeeper.server.quorum.QuorumPeerMain" in argv and \
                any(arg.startswith(str(data).encode()) for arg in argv):
            found.append(int(proc.name))
    return found


def test_two_starts_at_once_give_one_server(tmp_path):
    base = tmp_path / "state"
    starts = [subprocess.Popen([CLI, "--state-dir", str(base), "zookeeper", "start"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        results = [start.communicate(timeout=300) for start in starts]
        assert [start.returncode for start in starts] == [0, 0], results
        outputs = sorted(out for out, _err in results)
        assert "ZooKeeper already running at" in outputs[0] and "ZooKeeper started at" in outputs[1], outputs
        state = read_state(base)
        assert state is not None
        pids = {int(out.split("(pid ")[1].split(",")[0]) for out, _err in results}
        assert pids == {state["pid"]}, (pids, state)
        assert _servers_on(base / "zookeeper") == [state["pid"]]
        lock = base / "zookeeper.lock"
        assert os.stat(lock).st_mode & 0o777 == 0o600 and os.stat(lock).st_uid == os.geteuid()
    finally:
        stopped = _cli(base, "zookeeper", "stop")
    assert stopped.returncode == 0 and "ZooKeeper stopped" in stopped.stdout, stopped
    assert _servers_on(base / "zookeeper") == []


def test_a_start_waits_for_the_lock_and_gives_up_with_one_line(tmp_path):
    base = private_dir(tmp_path / "state")
    held = exclusive_lock(base / "zookeeper.lock", timeout=1, holder="test")
    refused = pytest.raises(StateLocked, match=r"zookeeper\.lock is locked: another process has been busy")
    with held, refused, exclusive_lock(base / "zookeeper.lock", timeout=0.5, holder="a ZooKeeper start"):
        pass  # pragma: no cover - never entered
    # Released with its holder: the next one gets it at once.
    with exclusive_lock(base / "zookeeper.lock", timeout=0, holder="test"):
        pass


def test_a_lock_file_planted_as_a_link_or_left_open_is_refused(tmp_path):
    base = private_dir(tmp_path / "state")
    victim = tmp_path / "victim"
    victim.write_text("root's file")
    (base / "zookeeper.lock").symlink_to(victim)
    refused = _cli(base, "zookeeper", "start")
    assert refused.returncode == 2 and "zookeeper.lock: is a symbolic link" in refused.stderr, refused
    assert len(refused.stderr.strip().splitlines()) == 1 and victim.read_text() == "root's file"
    (base / "zookeeper.lock").unlink()
    (base / "zookeeper.lock").write_text("")
    os.chmod(base / "zookeeper.lock", 0o666)
    with pytest.raises(UnsafeState, match="readable or writable by others"), \
            exclusive_lock(base / "zookeeper.lock", timeout=0, holder="test"):
        pass  # pragma: no cover - never entered
    assert _servers_on(base / "zookeeper") == []


def test_the_cli_and_the_demo_keep_credentials_and_ca_in_the_same_files(tmp_path):
    base = tmp_path / "state"
    started = _cli(base, "zookeeper", "start")
    assert started.returncode == 0, started.stderr
    try:
        folder = base / "zookeeper"
        assert f"the password is in the 0600 file {folder / 'credentials.json'}" in started.stdout
        credentials = json.loads((folder / "credentials.json").read_text())
        assert os.stat(folder / "credentials.json").st_mode & 0o777 == 0o600
        state = read_state(base)
        assert state is not None and "credentials" not in state
        assert state["ca"] == str(folder / "tls" / "ca.pem")
        settings = client_settings(base, state)
        assert (settings.certfile, settings.keyfile) == (str(folder / "tls" / "client-cert.pem"),
                                                         str(folder / "tls" / "client-key.pem"))
        assert (settings.login, settings.password) == (credentials["user"], credentials["password"])
        assert not (base / "zookeeper-tls").exists()
    finally:
        assert _cli(base, "zookeeper", "stop").returncode == 0


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on."""
    return {port for _, port in listening_addresses([pid])}


def test_tls_by_default_opens_no_plaintext_port(tmp_path):
    """By default the server listens on its TLS port alone: nothing takes a session (or a password)
    without TLS. ``--plaintext`` (explicit) serves plaintext alone."""
    from airflow_epochs.servers.embedded_zookeeper import four_letter_word

    base = tmp_path / "state"
    started = _cli(base, "zookeeper", "start")
    assert started.returncode == 0 and "over TLS" in started.stdout, started
    try:
        state = read_state(base)
        assert state is not None and state["port"] == state["secure_port"]
        assert _listening_ports(state["pid"]) == {state["secure_port"]}
        assert four_letter_word(state["port"]) == ""  # plaintext on the TLS port: no answer
        # mutual TLS: without our client certificate the server answers nothing, with it it does
        assert four_letter_word(state["port"], ca=state["ca"], timeout=5) == ""
        assert state["certfile"] == str(base / "zookeeper" / "tls" / "client-cert.pem")
        assert "Mode: standalone" in four_letter_word(state["port"], ca=state["ca"], certfile=state["certfile"],
                                                      keyfile=state["keyfile"], timeout=5)
        status = _cli(base, "zookeeper", "status")
        assert status.returncode == 0 and "mode standalone" in status.stdout, status
    finally:
        assert _cli(base, "zookeeper", "stop").returncode == 0
    plain = tmp_path / "plain"
    started = _cli(plain, "zookeeper", "start", "--plaintext")
    assert started.returncode == 0 and "over PLAINTEXT" in started.stdout, started
    try:
        state = read_state(plain)
        assert state is not None and state.get("secure_port") is None and state["ca"] is None
        assert _listening_ports(state["pid"]) == {state["port"]}
    finally:
        assert _cli(plain, "zookeeper", "stop").returncode == 0


def test_a_state_folder_of_an_earlier_version_keeps_working(tmp_path):
    """A folder laid out as earlier versions did (credentials in ``zookeeper.json``, the CA in
    ``zookeeper-tls/``), with data locked by those credentials: the next start moves them to the shared
    files, once, and the data stays readable by the same credentials."""
    base = tmp_path / "state"
    started = _cli(base, "zookeeper", "start")
    assert started.returncode == 0, started.stderr
    try:
        client = client_settings(base, read_state(base) or {}).start_client(timeout=60)
        try:
            client.create("/kept", b"written before the move")
        finally:
            client.stop()
            client.close()
    finally:
        assert _cli(base, "zookeeper", "stop").returncode == 0
    # Back to the earlier layout, as that version left it after a stop.
    folder = base / "zookeeper"
    credentials = json.loads((folder / "credentials.json").read_text())
    (folder / "tls").rename(base / "zookeeper-tls")
    (folder / "credentials.json").unlink()
    kept = json.loads((base / "zookeeper.json").read_text())
    (base / "zookeeper.json").write_text(json.dumps({**kept, "credentials": credentials}))
    os.chmod(base / "zookeeper.json", 0o600)

    again = _cli(base, "zookeeper", "start")
    assert again.returncode == 0, again.stderr
    try:
        assert json.loads((folder / "credentials.json").read_text()) == credentials
        assert (folder / "tls" / "ca.pem").exists() and not (base / "zookeeper-tls").exists()
        state = read_state(base)
        assert state is not None and "credentials" not in state and state["port"] == kept["port"]
        client = client_settings(base, state).start_client(timeout=60)
        try:
            assert client.get("/kept")[0] == b"written before the move"
        finally:
            client.stop()
            client.close()
        status = subprocess.run([CLI, "--state-dir", str(base), "zookeeper", "status"], capture_output=True,
                                text=True, timeout=60)
        assert status.returncode == 0, status
    finally:
        assert _cli(base, "zookeeper", "stop").returncode == 0
