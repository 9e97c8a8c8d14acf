"""Issue 35: ``bash scripts/demo.sh --serve`` opens no port another local user can use.

The demo is started as a user starts it (``bash scripts/demo.sh --serve --days 1``, in its own
terminal-like process group, with a private state folder). Once it prints its login, the test checks
that the UI's and the API's paths refuse a request without a login and answer one with the printed
password; that every TCP socket its process tree listens on is on loopback; and, as a throw-away second
local user, that no such port serves that user a page or a ZooKeeper session (our client certificate
gets one: the control) and that PostgreSQL's Unix socket is out of that user's reach. Then Ctrl-C (a
SIGINT to the demo's process group, as a terminal sends it) stops it, and no process of its tree is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user
from listening_sockets import listening_addresses
from secret_poller import Polled, polling_for_secrets, secrets_on_command_lines
from zk_attacks import ATTACK

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]

# Paths of Airflow's API, the UI's own API and the Epochs page: each needs a login.
PROTECTED = ("/api/v2/dags", "/ui/config", "/epochs/", "/epochs/api/pipelines")

# The second user's probe of every port given: an HTTP GET of each protected path (the status line, or
# the error), bounded by a timeout.
HTTP_PROBE = """
import json, socket, sys
paths = sys.argv[2:]
answers = {}
for port in sys.argv[1].split(","):
    for path in paths:
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as s:
                s.sendall(f"GET {path} HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n".encode())
                answers.setdefault(port, []).append(s.recv(200).split(b"\\r\\n")[0].decode(errors="replace"))
        except OSError as exc:
            answers.setdefault(port, []).append("ERROR " + type(exc).__name__)
print(json.dumps(answers), flush=True)
"""

# Where the demo's PostgreSQL keeps initdb's password file while initdb runs (in a folder of the temporary
# directory): the old name and the new one, which the second user polls for from before the start.
SECRET_FILES = ("pwfile", "initdb-secret/pwfile")

UNIX_PROBE = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("CONNECTED")
except OSError as exc:
    print("ERROR", type(exc).__name__)
"""


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    return children


def _tree(root: int) -> set[int]:
    """``root`` and every live descendant of it."""
    children = _children()
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if Path(f"/proc/{pid}").exists()}


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def _socket_folders(names: dict[int, str]) -> list[Path]:
    """The Unix socket folders (``-k``) of the PostgreSQL servers among ``names``."""
    folders = []
    for pid, name in names.items():
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if name == "postgres" else []
        if b"-k" in argv:
            folders.append(Path(argv[argv.index(b"-k") + 1].decode()))
    return folders


def _loopback(hex_address: str) -> bool:
    if len(hex_address) == 8:
        return bytes.fromhex(hex_address)[::-1][0] == 127
    return hex_address in ("00000000000000000000000001000000",  # ::1
                           "0000000000000000FFFF00000100007F")  # ::ffff:127.0.0.1


def _demo_secrets(state: Path, admin_password: str, tree: set[int]) -> dict[str, str]:
    """The demo's secrets: the admin's password it printed, ZooKeeper's digest password, the Spark Connect
    token and PostgreSQL's password (read from an Airflow process's environment, where it travels)."""
    found = {"admin password": admin_password,
             "zookeeper password": json.loads((state / "zookeeper" / "credentials.json").read_text())["password"],
             "spark connect token": (state / "spark-connect" / "token").read_text().strip()}
    for pid in tree:
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            for entry in environ:
                if entry.startswith(b"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="):
                    found["postgres password"] = entry.decode().split("://postgres:", 1)[1].split("@", 1)[0]
    assert len(found) == 4 and all(len(v) >= 8 for v in found.values()), sorted(found)
    return found


def _http(url: str, *, token: str | None = None, data: bytes | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _zk_answers(argv_prefix: list[str], port: int, count: int, cert: list[str]) -> tuple[int, int]:
    """(tried, answered) of ``count`` ZooKeeper ConnectRequests over TLS (with ``cert``, if given) to ``port``."""
    done = subprocess.run([*argv_prefix, "/usr/bin/python3", "-I", "-c", ATTACK, str(port), str(count), "30", "0",
                           *cert],
                          capture_output=True, text=True, timeout=120, cwd="/")
    fields = done.stdout.split()
    assert len(fields) == 4, done
    return int(fields[1]), int(fields[3])


@pytest.fixture
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


@pytest.fixture
def demo(tmp_path, intruder) -> Iterator[tuple[subprocess.Popen[str], Path, list[str], Callable[[], Polled]]]:
    """The demo, started with the second user already polling for secret files (issue 48: PostgreSQL's
    password file was readable while initdb ran); the yielded function stops the poller and says what it read."""
    polling = contextlib.ExitStack()
    polled = polling.enter_context(polling_for_secrets(intruder, [tempfile.gettempdir()], SECRET_FILES))

    def stop_polling() -> Polled:
        polling.close()
        return polled

    state = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(PYTHONUNBUFFERED="1")
    # Its own process group, as a shell gives a foreground job: Ctrl-C reaches every process in it.
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "demo.sh"), "--serve", "--days", "1",
                             "--state-dir", str(state)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        yield proc, state, lines, stop_polling
    finally:
        polling.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        _kill_leftovers(state)


def _kill_leftovers(state: Path) -> None:
    """Kill what a failed run left behind: the embedded servers run in sessions of their own, so a SIGKILL of the
    demo's group does not reach them, and a leaked JVM would stay for the rest of the test run."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(state).encode() in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def _wait_for(lines: list[str], proc: subprocess.Popen[str], pattern: str, seconds: float) -> re.Match[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in list(lines):
            found = re.search(pattern, line)
            if found:
                return found
        assert proc.poll() is None, "the demo exited:\n" + "".join(lines[-60:])
        time.sleep(0.5)
    pytest.fail(f"no line matching {pattern!r} after {seconds:.0f} s:\n" + "".join(lines[-60:]))


def test_demo_serve_answers_only_its_login_on_loopback_and_stops_on_ctrl_c(demo, intruder):
    proc, state, lines, stop_polling = demo
    started = time.monotonic()
    login = _wait_for(lines, proc, r"UI:\s+(http://127\.0\.0\.1:(\d+))/\s+\(login: admin / (\S+)\)", 240)
    base, api_port, password = login.group(1), int(login.group(2)), login.group(3)
    _wait_for(lines, proc, r"Ctrl-C stops everything", 120)  # the DAGs are unpaused: tasks may run now
    up = time.monotonic() - started

    # Issue 48: no secret was in a file the second user could read while everything started, and none is
    # on a command line of the demo's processes (which any local user reads in /proc/*/cmdline).
    secrets = _demo_secrets(state, password, _tree(proc.pid))
    polled = stop_polling()
    assert polled.rounds >= 20, polled  # it polled all through the start
    assert polled.holding(*secrets.values()) == {}, polled.holding(*secrets.values())
    assert secrets_on_command_lines(intruder, secrets) == []

    # No login, no answer; the printed login gets one.
    for path in PROTECTED:
        code, body = _http(base + path)
        assert code in (401, 403), (path, code, body[:300])
    code, body = _http(f"{base}/auth/token", data=json.dumps({"username": "admin", "password": password}).encode())
    assert code == 201, body
    token = json.loads(body)["access_token"]
    for path in PROTECTED:
        code, body = _http(base + path, token=token)
        assert code == 200, (path, code, body[:300])
    assert "nycflights_daily" in _http(f"{base}/api/v2/dags", token=token)[1]
    bad = _http(f"{base}/auth/token", data=json.dumps({"username": "admin", "password": "x" + password}).encode())
    assert bad[0] in (401, 403), bad

    # Every listening TCP socket of the tree is on loopback.
    tree = _tree(proc.pid)
    identities = {pid: _start_time(pid) for pid in tree}
    names = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in tree if Path(f"/proc/{pid}").exists()}
    assert "java" in names.values() and "postgres" in names.values(), names  # ZooKeeper, Spark, PostgreSQL
    sockets = listening_addresses(sorted(tree))
    assert not [s for s in sockets if not _loopback(s[0])], sockets
    ports = sorted({port for _, port in sockets})
    zk_ports = {int(text) for text in ((state / name).read_text().strip() for name in ("zookeeper.tls-port",
                "zookeeper.port")) if text.isdigit()}
    assert zk_ports, list(state.iterdir())
    assert api_port in ports and zk_ports <= set(ports), (api_port, zk_ports, ports)
    # PostgreSQL listens on no TCP port; its Unix socket is in a folder the second user cannot enter.
    assert listening_addresses([pid for pid, name in names.items() if name == "postgres"]) == set()
    pg_sockets = [path for folder in _socket_folders(names) for path in folder.glob(".s.PGSQL.*")
                  if not path.name.endswith(".lock")]
    assert len(pg_sockets) == 1, pg_sockets
    assert pg_sockets[0].parent.stat().st_mode & 0o777 == 0o700
    tried = intruder.run(["/usr/bin/python3", "-I", "-c", UNIX_PROBE, str(pg_sockets[0])], cwd="/")
    assert tried.stdout.strip() == "ERROR PermissionError", tried

    # The second user gets no page from any port: the API server asks for a login, the others answer
    # no HTTP at all.
    tried = intruder.run(["/usr/bin/python3", "-I", "-c", HTTP_PROBE, ",".join(map(str, ports)), *PROTECTED],
                         cwd="/", timeout=300)
    answers = json.loads(tried.stdout)
    assert set(answers) == {str(p) for p in ports}, tried
    for port, statuses in answers.items():
        codes = [s.split()[1] for s in statuses if s.startswith("HTTP/") and len(s.split()) > 1]
        assert not [c for c in codes if c.startswith("2")], (port, statuses)  # nothing served
        if int(port) == api_port:
            assert set(codes) <= {"401", "403"} and len(codes) == len(PROTECTED), statuses
    # ... and no ZooKeeper session from any port without our certificate; with it, ZooKeeper answers.
    cert = [str(state / "zookeeper" / "tls" / name) for name in ("client-cert.pem", "client-key.pem")]
    for port in ports:
        count = 3 if port in zk_ports else 1
        assert _zk_answers(intruder.argv([]), port, count, []) == (count, 0), port
    for port in zk_ports:
        assert _zk_answers([], port, 1, cert) == (1, 1), port  # the control: the probe can see a session
    checked = time.monotonic() - started

    # Ctrl-C, as the demo says: everything it started stops.
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(120) == 0, "".join(lines[-40:])
    time.sleep(1)
    assert any("stopped" in line for line in lines[-5:]), "".join(lines[-20:])
    left = {pid: names.get(pid) for pid, start in identities.items() if _start_time(pid) == start}
    assert not left, left
    print(f"demo --serve: up {up:.0f} s, checked {checked:.0f} s, stopped {time.monotonic() - started:.0f} s "
          f"after start; {len(ports)} listening ports")
