"""Issue 35, items 4 and 5: the embedded ZooKeeper (``secured_server``: the CLI's and the demo's) requires
a client certificate only our processes hold (mutual TLS). Each attack runs as a throw-away second local
user (created and removed by the test), bounded in count and time, and stops by itself:

- the watch flood: a session that would send ``setWatches`` for many paths never gets a session at all
  (no ZooKeeper answer to its ConnectRequest, with no certificate or with one of its own making);
- the socket flood: 20,000 idle connections held by the second user lock no client of ours out, and the
  supervisor tells the flood from a dead server;
- a wedged server (alive, not answering) is restarted by the supervisor, not only an exited one;
- the server's log rotates under a flood of refused handshakes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import Intruder, second_user, shared_folder
from zk_attacks import ATTACK
from zk_attacks import attack as _attack

from airflow_epochs.connection.socket_census import foreign_connections
from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.servers.dev_certificates import generate_dev_certificates
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, four_letter_word
from airflow_epochs.servers.secured_zookeeper import secured_server
from airflow_epochs.servers.supervision import ZooKeeperSupervisor

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

# The second user's idle sockets: COUNT plain TCP connections to PORT from the loopback address SOURCE, none
# sending a byte, each one the server closes opened again at once, until SECONDS pass.
FLOOD = r"""
import selectors, socket, sys, time
port, count, seconds, source = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
watched = selectors.DefaultSelector()
def connect():
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    try:
        sock.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    except OSError:
        sock.close()
        return
    watched.register(sock, selectors.EVENT_READ)
for _ in range(count):
    connect()
print("HOLDING", len(watched.get_map()), flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in watched.select(timeout=0.5):
        try:
            data = key.fileobj.recv(1024)
        except OSError:
            data = b""
        if not data:
            watched.unregister(key.fileobj)
            key.fileobj.close()
            connect()
"""
FLOOD_EACH, FLOOD_SECONDS = 10_000, 60  # two processes: 20,000 sockets, the JVM's descriptor limit here


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


def test_a_flood_of_20000_idle_sockets_locks_no_client_out_and_is_told_from_a_dead_server(intruder, server):
    """Issue 48, item 5: two processes of the second user hold 10,000 idle plain sockets each (from two
    loopback source addresses, as one address's ephemeral ports would not bound them; every socket the server
    closes is opened again at once), as many as the JVM's file descriptors here. Before, they used up the
    descriptors: our held session expired, a new client got nowhere in 60 s and the supervisor restarted the
    server again and again. Now the server lets at most ``pending_handshake_limit`` handshakes be pending
    (closing the rest at once), so it keeps descriptors for our clients, and queues few connections
    (``LISTEN_BACKLOG``), so the flood's reconnections wait out dropped SYNs instead of taking its CPU: the
    held session lives (its connection may drop and resume), each new client connects and reads through the
    ledger's calls (which retry a lost connection, as every task's do), and the supervisor, seeing the flood
    and a server working through it, restarts nothing (and says so). A server frozen (SIGSTOP) during the
    same flood is still restarted: a dead server is told from a flooded one."""
    said: list[str] = []
    supervisor = ZooKeeperSupervisor(server, say=said.append, unresponsive_after=10, probe_every=1).start()
    settings = server.client_settings()
    held = settings.start_client(timeout=60)
    EpochLedger(held, "flooded", owner="o").create_pipeline(PipelineConfig({"p": ("q",)}))
    states: list[str] = []
    held.add_listener(lambda state: states.append(str(state)))
    flooders = [intruder.popen(["/usr/bin/python3", "-I", "-c", FLOOD, str(server.port), str(FLOOD_EACH),
                                str(FLOOD_SECONDS), source], stdout=subprocess.PIPE, text=True, cwd="/")
                for source in ("127.0.0.2", "127.0.0.3")]
    latencies: list[float] = []
    failures: list[str] = []
    frozen = None
    census = _Census(server.port)
    try:
        for flooder in flooders:
            assert flooder.stdout is not None and flooder.stdout.readline().split() == ["HOLDING", str(FLOOD_EACH)]
        flood_began = time.monotonic()
        census.start()
        while time.monotonic() - flood_began < FLOOD_SECONDS - 25:
            started = time.monotonic()
            try:  # the default client, as a task's hook starts it, and a read through the ledger's own calls
                client = settings.start_client(timeout=60)
                try:
                    assert EpochLedger(client, "flooded", owner="o").frontier() == 0
                finally:
                    client.stop()
                    client.close()
            except Exception as exc:  # noqa: BLE001 - what locked it out is the failure reported
                failures.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            latencies.append(time.monotonic() - started)
        assert EpochLedger(held, "flooded", owner="o").frontier() == 0  # still in the flood
        census.stop()
        largest = census.largest
        print(f"during the flood of {largest} sockets new clients connected and read in "
              f"{[round(x, 1) for x in latencies]} s; failed: {failures}; held session: {states}")
        assert supervisor.restarts == 0, said
        # Whenever a probe went unanswered in the flood, the supervisor said it was a flood (a server that
        # answered every probe through it gives it nothing to say): nothing else, and no restart.
        assert all("a flood, not a dead server" in line or "the flood has ended" in line for line in said), said
        assert "LOST" not in states, states  # the held session lived (its connection may have been dropped)
        assert failures == [] and len(latencies) >= 3, (failures, latencies)  # every new client got through
        assert largest >= FLOOD_EACH, largest  # the flood was there, as large as the JVM's descriptors
        member = server.members[0]
        assert member.process is not None
        frozen = member.process.pid
        os.kill(frozen, signal.SIGSTOP)  # dead to the world, in the middle of the same flood
        deadline = time.monotonic() + 240
        while supervisor.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert supervisor.restarts == 1 and any("has not answered for" in line for line in said), said
    finally:
        census.stop()
        supervisor.stop()
        if frozen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGCONT)
        for flooder in flooders:
            flooder.wait(timeout=FLOOD_SECONDS + 120)
        held.stop()
        held.close()
    _our_client_works(server)


class _Census(threading.Thread):
    """The most sockets other users held to ``port`` at once, counted every half second until stopped."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.largest, self._stopping = port, 0, threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(0.5):
            self.largest = max(self.largest, sum(foreign_connections(self.port).values()))

    def stop(self) -> None:
        self._stopping.set()


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
