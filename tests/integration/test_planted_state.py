"""State that another local user cannot plant: each attack runs as a throw-away second user (created
with useradd, removed afterwards; skipped when not root) against the CLI run as root, and is refused
with one line naming the path, its owner and its mode, before anything is started, written or
signalled."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user, shared_folder

from airflow_epochs.private_files import UnsafeState, private_dir, read_private, write_private
from airflow_epochs.process_identity import NotOurProcess, identify, launch_environment, stop_verified
from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer

CLI = str(Path(sys.executable).parent / "airflow-epochs")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


@pytest.fixture()
def shared() -> Iterator[Path]:
    with shared_folder() as folder:
        yield folder


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--state-dir", str(home), *args], capture_output=True, text=True, timeout=120)


def _one_line_refusal(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def _victim_file(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    return victim


def test_a_token_planted_by_another_user_is_never_adopted(intruder, shared):
    home = shared / "home"
    intruder.sh(f"mkdir -p {home}/spark-connect && printf planted-token-0123456789 > {home}/spark-connect/token "
                f"&& chmod 600 {home}/spark-connect/token")
    refused = _cli(home, "spark-connect", "start")
    _one_line_refusal(refused, str(home), "owned by another user", intruder.name)
    with pytest.raises(UnsafeState, match=f"owned by another user.*{intruder.name}"):
        SparkConnectServer(home / "spark-connect")
    assert not any(p.name == "spark-connect.log" for p in home.rglob("*"))  # nothing was started


def test_a_token_file_others_can_read_or_a_link_is_not_adopted(tmp_path):
    folder = private_dir(tmp_path / "spark-connect")
    token = folder / "token"
    token.write_text("an-open-token-0123456789\n")
    os.chmod(token, 0o644)
    with pytest.raises(UnsafeState, match=r"readable or writable by others.*mode 0644"):
        SparkConnectServer(folder)
    token.unlink()
    planted = tmp_path / "elsewhere"
    planted.write_text("linked-token-0123456789\n")
    os.chmod(planted, 0o600)
    token.symlink_to(planted)
    with pytest.raises(UnsafeState, match="is a symbolic link"):
        SparkConnectServer(folder)


def test_planted_temporary_file_links_are_never_written_through(tmp_path, intruder, shared):
    """The old attack: ``.zookeeper.json.<pid>.tmp`` links to a root file made ``zookeeper start``
    overwrite and chmod it. Now the folder is refused, and in a folder of ours temporary names are random
    and created O_EXCL|O_NOFOLLOW."""
    victim = _victim_file(tmp_path)
    home = shared / "home"
    pid = os.getpid()
    intruder.sh(f"mkdir {home} && chmod 755 {home} && for p in $(seq {pid} {pid + 400}); do "
                f"ln -s {victim} {home}/.zookeeper.json.$p.tmp; done && ln -s {victim} {home}/zookeeper.json")
    refused = _cli(home, "zookeeper", "start")
    _one_line_refusal(refused, str(home), "owned by another user", intruder.name, "mode 0755")
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644

    # A folder of ours that others may write (0777) is refused just the same.
    open_home = shared / "open-home"
    open_home.mkdir()
    os.chmod(open_home, 0o777)
    intruder.sh(f"ln -s {victim} {open_home}/.zookeeper.json.{pid + 1}.tmp")
    _one_line_refusal(_cli(open_home, "zookeeper", "start"), str(open_home), "writable by others", "mode 0777")
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644

    # In a private folder, a link where the file goes is replaced, never followed.
    ours = private_dir(tmp_path / "ours")
    (ours / "zookeeper.json").symlink_to(victim)
    write_private(ours / "zookeeper.json", "{}")
    assert not (ours / "zookeeper.json").is_symlink() and read_private(ours / "zookeeper.json") == "{}"
    assert victim.read_text() == "precious\n"


def test_a_symlinked_state_folder_is_refused_and_its_target_untouched(tmp_path, intruder, shared):
    target = tmp_path / "victim-folder"
    target.mkdir()
    os.chmod(target, 0o755)
    home = shared / "home"
    intruder.run(["ln", "-s", str(target), str(home)])
    for command in (("zookeeper", "start"), ("spark-connect", "start"), ("zookeeper", "stop")):
        _one_line_refusal(_cli(home, *command), str(home), "is a symbolic link", intruder.name)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []
    demo = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--state-dir", str(home), "--days", "1"],
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 2 and "is a symbolic link" in demo.stdout, demo
    assert list(target.iterdir()) == []


def test_a_state_folder_under_another_users_grandparent_is_refused(intruder, shared):
    """Issue 35: only the state folder's direct parent was checked; a grandparent another user owns can
    move the branch away and put its own in place. Every ancestor up to / is checked, before anything
    is created."""
    intruder.run(["mkdir", "-m", "0755", str(shared / "theirs")])
    os.mkdir(shared / "theirs" / "ours", 0o755)  # ours (root's), 0755: the direct parent passes alone
    home = shared / "theirs" / "ours" / "state"
    with pytest.raises(UnsafeState, match=rf"theirs'.*owned by another user.*{intruder.name}"):
        private_dir(home)
    with pytest.raises(UnsafeState, match="owned by another user"):
        private_dir(shared / "theirs" / "ours" / "new" / "deeper" / "state")
    assert sorted(p.name for p in (shared / "theirs" / "ours").iterdir()) == []  # nothing was created
    _one_line_refusal(_cli(home, "zookeeper", "start"), "owned by another user", intruder.name)
    assert not home.exists()


def _victim_group() -> subprocess.Popen[bytes]:
    """A root process group (a shell leading it and a sleep in it), with no nonce of ours."""
    return subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)


@pytest.mark.parametrize("server", ["zookeeper", "spark-connect"])
def test_a_forged_identity_gets_nothing_signalled(tmp_path, intruder, shared, server):
    victim = _victim_group()
    try:
        found = identify(victim.pid)
        assert found is not None and found.nonce == ""
        # The intruder copies what /proc shows everyone; the environment (where a nonce lives) it cannot read.
        assert intruder.run(["cat", f"/proc/{victim.pid}/environ"], check=False).returncode != 0
        forged = {**found.to_json(), "nonce": "guessed"}
        state = json.dumps({"pid": victim.pid, "port": 2181, "identity": forged})
        home = shared / "home"
        intruder.sh(f"mkdir {home} && printf '%s' '{state}' > {home}/{server}.json")
        _one_line_refusal(_cli(home, server, "stop"), f"{home}", "owned by another user", intruder.name)
        # The same forged record in a state folder of ours: the nonce does not match, nothing is signalled.
        ours = private_dir(tmp_path / "ours")
        write_private(ours / f"{server}.json", state)
        _one_line_refusal(_cli(ours, server, "stop"), f"pid {victim.pid} is not the process that was started")
        write_private(ours / f"{server}.json", json.dumps({"pid": victim.pid, "port": 2181,
                                                           "identity": found.to_json()}))
        _one_line_refusal(_cli(ours, server, "stop"), "no launch nonce")
        assert victim.poll() is None
        group = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid(int(p.name)) == victim.pid]
        assert len(group) >= 2  # the shell and its sleep: the whole group lives
    finally:
        os.killpg(victim.pid, 9)
        victim.wait()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_only_a_process_carrying_our_nonce_is_stopped():
    ours = subprocess.Popen(["sleep", "300"], env=launch_environment(), start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        recorded, foreign = identify(ours.pid), identify(other.pid)
        assert recorded is not None and recorded.nonce and recorded.uid == os.geteuid()
        assert recorded.nonce not in repr(recorded) and recorded.nonce not in recorded.describe()
        assert foreign is not None
        with pytest.raises(NotOurProcess, match="no launch nonce"):
            stop_verified(foreign)
        assert other.poll() is None
        assert stop_verified(recorded) is True
        ours.wait(10)
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()
