"""Issue 35: a worker's log server (``python -I -m airflow_epochs.worker_logs``) listens on the one
address it is given, serves a task's log only to a request carrying the deployment's signed token for
that file (the token the API server makes, Airflow's own check), and serves another local user nothing;
a wildcard address is refused before anything is bound."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow_stack import _free_port
from intruder import Intruder, second_user
from listening_sockets import listening_addresses

from airflow_epochs.spark.loopback import process_group

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

ADDRESS = "127.0.0.2"  # a loopback address of its own, as a worker host has one of its own
SECRET = "the-deployments-api-secret-key-for-this-test-" + "k" * 32  # HS512 wants 64 bytes or more
LOG = "dag_id=d/run_id=r/task_id=t/attempt=1.log"

# The second user's GET of each path on the log server (with the header given, if any): the status lines.
PROBE = """
import socket, sys
host, port, header = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for path in sys.argv[4:]:
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            extra = f"{header}\\r\\n" if header else ""
            s.sendall(f"GET {path} HTTP/1.0\\r\\nHost: localhost\\r\\n{extra}\\r\\n".encode())
            print(s.recv(200).split(b"\\r\\n")[0].decode(errors="replace"), flush=True)
    except OSError as exc:
        print("ERROR", type(exc).__name__, flush=True)
"""


def _token(filename: str, secret: str = SECRET) -> str:
    """The token the API server sends a worker's log server (file_task_handler's generator's settings)."""
    from airflow.api_fastapi.auth.tokens import JWTGenerator

    generator = JWTGenerator(secret_key=secret, algorithm="HS512", private_key=None,  # type: ignore[arg-type]
                             issuer=None, valid_for=30, audience="task-instance-logs")
    return generator.generate({"filename": filename})


def _get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _env(folder: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(folder / "home"),
            "AIRFLOW__API__SECRET_KEY": SECRET, "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(folder / "logs"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{folder / 'home' / 'airflow.db'}",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


@contextlib.contextmanager
def _serving(folder: Path, args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``python -I -m airflow_epochs.worker_logs --host ADDRESS *args``, until it listens; stopped after."""
    with open(folder / "server.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-I", "-m", "airflow_epochs.worker_logs", "--host", ADDRESS, *args],
                                env={**_env(folder), **env}, cwd=folder, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not listening_addresses(process_group(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()
            time.sleep(0.3)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _logs(folder: Path, relative: str, text: str) -> None:
    log = folder / "logs" / relative
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)


@pytest.fixture
def log_server(tmp_path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    _logs(tmp_path, LOG, "hello from the worker\n")
    (tmp_path / "secret.txt").write_text("not a log\n")
    port = _free_port()
    with _serving(tmp_path, ["--port", str(port)], {}) as proc:
        yield proc, port


def test_the_log_server_binds_its_one_address_and_serves_only_signed_requests(log_server):
    proc, port = log_server
    # one socket, on the address given (127.0.0.2 in /proc's little-endian hex), no other interface
    assert listening_addresses(process_group(proc.pid)) == {("0200007F", port)}
    url = f"http://{ADDRESS}:{port}/log/{LOG}"
    assert _get(url, _token(LOG)) == (200, "hello from the worker\n")  # as the API server fetches it
    assert _get(url, None)[0] == 403
    assert _get(url, _token(LOG, secret="another-deployments-secret-key-" + "x" * 40))[0] == 403
    assert _get(url, _token("dag_id=d/run_id=r/task_id=other/attempt=1.log"))[0] == 403  # a token is for one file
    assert _get(f"http://{ADDRESS}:{port}/log/../secret.txt", _token("../secret.txt"))[0] in (403, 404)
    with pytest.raises(urllib.error.URLError):  # nothing on 127.0.0.1 (nor on any other interface)
        _get(f"http://127.0.0.1:{port}/log/{LOG}", _token(LOG))


def test_another_local_user_gets_nothing_from_the_log_server(log_server):
    _, port = log_server
    with second_user() as intruder:
        answers = _probe(intruder, port, "", f"/log/{LOG}", "/", "/log/")
        assert answers and all(a.startswith("HTTP/") for a in answers), answers
        assert {a.split()[1] for a in answers} <= {"403", "404"}, answers  # no token, no log
        forged = _token(LOG, secret="a-guessed-secret-key-" + "g" * 50)
        assert [a.split()[1] for a in _probe(intruder, port, f"Authorization: {forged}", f"/log/{LOG}")] == ["403"]
        # the control: the same probe with the deployment's token gets the log
        assert _probe(intruder, port, f"Authorization: {_token(LOG)}", f"/log/{LOG}")[0].split()[1] == "200"


def test_a_triggerers_log_server_serves_its_trigger_logs_on_the_trigger_port_and_nothing_to_another_user(tmp_path):
    """The triggerer's log server (``--component triggerer``): on ``[logging] trigger_log_server_port`` (the
    port the API server asks a triggerer job's hostname on), one address, signed requests only."""
    trigger_log = LOG + ".trigger.7.log"  # the name the triggerer's job 7 gives its file (Airflow's suffix)
    _logs(tmp_path, trigger_log, "hello from the trigger\n")
    port, worker_port = _free_port(), _free_port()
    settings = {"AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(port),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_port)}
    with _serving(tmp_path, ["--component", "triggerer"], settings) as proc:
        assert listening_addresses(process_group(proc.pid)) == {("0200007F", port)}  # not the workers' port
        url = f"http://{ADDRESS}:{port}/log/{trigger_log}"
        assert _get(url, _token(trigger_log)) == (200, "hello from the trigger\n")
        assert _get(url, None)[0] == 403
        assert _get(url, _token(LOG))[0] == 403  # the task's token is not the trigger log's
        with second_user() as intruder:
            answers = _probe(intruder, port, "", f"/log/{trigger_log}", "/", "/log/")
            assert answers and {a.split()[1] for a in answers} <= {"403", "404"}, answers
            # the control: with the deployment's token for that file the same probe gets it
            assert _probe(intruder, port, f"Authorization: {_token(trigger_log)}",
                          f"/log/{trigger_log}")[0].split()[1] == "200"


def _probe(intruder: Intruder, port: int, header: str, *paths: str) -> list[str]:
    tried = intruder.run(["/usr/bin/python3", "-I", "-c", PROBE, ADDRESS, str(port), header, *paths], cwd="/",
                         timeout=120)
    return tried.stdout.splitlines()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "localhost", "224.0.0.1", "127.0.0.1; rm -rf /"])
def test_a_wildcard_or_non_literal_address_is_refused_before_anything_is_bound(tmp_path, host):
    done = subprocess.run([sys.executable, "-I", "-m", "airflow_epochs.worker_logs", "--host", host, "--port",
                           str(_free_port())], env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done
    assert repr(host) in done.stderr, done.stderr
