"""Issue 35, items 4 and 5: the embedded ZooKeeper (``secured_server``: the CLI's and the demo's) requires
a client certificate only our processes hold (mutual TLS). Each attack runs as a throw-away second local
user (created and removed by the test), bounded in count and time, and stops by itself:

- the watch flood: a session that would send ``setWatches`` for many paths never gets a session at all
  (no ZooKeeper answer to its ConnectRequest, with no certificate or with one of its own making);
- the socket flood: thousands of idle connections held by the second user do not lock our clients out;
- a wedged server (alive, not answering) is restarted by the supervisor, not only an exited one;
- the server's log rotates under a flood of refused handshakes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user, shared_folder
from zk_attacks import ATTACK
from zk_attacks import attack as _attack

from airflow_epochs.servers.dev_certificates import generate_dev_certificates
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, four_letter_word
from airflow_epochs.servers.secured_zookeeper import secured_server
from airflow_epochs.servers.supervision import ZooKeeperSupervisor

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

# The second user's idle sockets: COUNT connections opened and held for SECONDS, then closed.
IDLE = r"""
import socket, sys, time
port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(count):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        break
print("HOLDING", len(held), flush=True)
time.sleep(seconds)
print("DONE", flush=True)
"""


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    with secured_server(tmp_path / "zookeeper") as started:
        yield started


def _our_client_works(server: EmbeddedZooKeeper) -> None:
    client = server.client_settings().start_client(timeout=60)
    try:
        assert client.exists("/") is not None
    finally:
        client.stop()
        client.close()


def _watch_count(server: EmbeddedZooKeeper) -> int:
    tls = server.tls
    assert tls is not None
    answer = four_letter_word(server.port, "mntr", timeout=5, **tls.client_files())
    return int(next(line.split()[1] for line in answer.splitlines() if line.startswith("zk_watch_count")))


def test_no_other_user_gets_a_session_so_no_watch_flood(intruder, server, tmp_path):
    """Without a certificate, and with a certificate of its own CA, the second user's ConnectRequests
    get no answer (the handshake is refused), so no setWatches is ever read; the server's watch count
    stays 0 and our clients work. The control: the same client with our certificate (run by us) gets
    its answer, so the attack would reach ZooKeeper if the server let it."""
    port = server.port
    assert _attack(intruder, port, 100) == (100, 0)
    with shared_folder() as shared:
        own = generate_dev_certificates(shared / "own-ca")
        for path in (shared / "own-ca", own.client_cert, own.client_key):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        assert _attack(intruder, port, 100, cert=[str(own.client_cert), str(own.client_key)]) == (100, 0)
    tls = server.tls
    assert tls is not None and tls.client_key is not None
    stolen = intruder.run(["cat", str(tls.client_key)], check=False, cwd="/")
    assert stolen.returncode != 0 and "PRIVATE KEY" not in stolen.stdout  # our key stays ours
    assert _watch_count(server) == 0
    _our_client_works(server)
    # the control, as us: with our certificate the same ConnectRequest gets ZooKeeper's answer
    files = tls.client_files()
    done = subprocess.run(["/usr/bin/python3", "-I", "-c", ATTACK, str(port), "1", "30", "10", files["certfile"],
                           files["keyfile"]], capture_output=True, text=True, timeout=90, cwd="/")
    assert done.stdout.split()[3] == "1", done


def test_idle_sockets_of_another_user_do_not_lock_our_clients_out(intruder, server):
    """The second user holds 2,000 idle connections (twenty seconds, then they close by themselves);
    meanwhile our client connects and works, and afterwards too."""
    holder = intruder.popen(["/usr/bin/python3", "-I", "-c", IDLE, str(server.port), "2000", "20"],
                            stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert holder.stdout is not None
        holding = holder.stdout.readline().split()
        assert holding[0] == "HOLDING" and int(holding[1]) >= 1000, holding
        started = time.monotonic()
        _our_client_works(server)
        assert time.monotonic() - started < 60
    finally:
        holder.wait(timeout=120)
    _our_client_works(server)


def test_a_wedged_server_is_restarted_by_the_supervisor(server):
    """The JVM is frozen (alive, its port accepting into the backlog, nothing answering): the supervisor's
    health probe (``srvr`` over our mutual TLS) finds it silent and restarts it on the same port and
    data; our clients work again."""
    member = server.members[0]
    assert member.process is not None
    frozen = member.process.pid
    said: list[str] = []
    supervisor = ZooKeeperSupervisor(server, say=said.append, unresponsive_after=5, probe_every=1).start()
    try:
        os.kill(frozen, signal.SIGSTOP)
        deadline = time.monotonic() + 180
        while supervisor.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert supervisor.restarts == 1, said
        assert "has not answered for" in said[0], said
        assert member.process.pid != frozen and member.mode() == "standalone"
        _our_client_works(server)
    finally:
        supervisor.stop()
        if member.process is not None and member.process.pid == frozen:
            os.kill(frozen, signal.SIGCONT)


class _SmallLogs(EmbeddedZooKeeper):
    log_file_size = "32KB"


def test_the_log_rotates_under_a_flood_of_refused_handshakes(intruder, tmp_path):
    """Refused handshakes are logged; the log rolls over at its size and keeps at most three files."""
    from airflow_epochs.connection.credentials import CREDENTIALS_FILE
    from airflow_epochs.servers.secured_zookeeper import load_or_create_auth
    from airflow_epochs.servers.zookeeper_security import ServerTls, ensure_certificates

    folder = tmp_path / "zookeeper"
    certificates = ensure_certificates(folder / "tls")
    tls = ServerTls(certificates.server_keystore, certificates.ca, client_auth="need",
                    client_cert=certificates.client_cert, client_key=certificates.client_key)
    with _SmallLogs(directory=folder, tls=tls, plaintext_port=False,
                    auth=load_or_create_auth(folder / CREDENTIALS_FILE)) as small:
        log = small.members[0].log_file
        for _ in range(10):
            _attack(intruder, small.port, 200, seconds=30)
            if Path(f"{log}.2").exists():
                break
        files = sorted(log.parent.glob(log.name + "*"))
        assert Path(f"{log}.1").exists(), [f.name for f in files]
        assert len(files) <= 3 and {f.name for f in files} <= {log.name, f"{log.name}.1", f"{log.name}.2"}
        assert all(f.stat().st_size <= 32 * 1024 + 16 * 1024 for f in files), [f.stat().st_size for f in files]
        _our_client_works(small)
