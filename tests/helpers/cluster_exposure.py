"""What another local user gets from a running :class:`cluster_topology.Cluster` (issue 35), and whether
the API server still shows a running task's log, which only the task's Celery worker holds.

:func:`listening_sockets` lists every TCP socket the cluster's processes (each component's process
group and every descendant: Spark executors, Celery's forks, the log servers) listen on;
:func:`probe` tries each as the second local user, in parallel, with what each of our protocols would
serve without credentials: an HTTP GET of paths that hold data, a Redis PING, a PostgreSQL startup as
the superuser and a ZooKeeper ConnectRequest over TLS without our client certificate.
"""

from __future__ import annotations

import ipaddress
import json
import re
import threading
import time
from typing import Any

from intruder import Intruder
from listening_sockets import listening_addresses

# Paths that hold data on each of our HTTP servers: Airflow's API, a worker's log server, Spark's UIs
# (master, workers, the Connect server's driver) and their JSON APIs.
PROTECTED = ("/api/v2/dags", "/api/v2/variables", "/log/dag_id=nycflights_daily/attempt=1.log", "/json/",
             "/api/v1/applications")

PROBE = r"""
import json, socket, ssl, struct, sys
from concurrent.futures import ThreadPoolExecutor
targets, cert, paths = sys.argv[1].split(","), sys.argv[2].split(",") if sys.argv[2] != "-" else [], sys.argv[3:]

def talk(host, port, data, tls=False):
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            s = raw
            if tls:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
                if cert:
                    ctx.load_cert_chain(cert[0], cert[1])
                s = ctx.wrap_socket(raw)
            s.sendall(data)
            return s.recv(200)
    except (OSError, ssl.SSLError) as exc:
        return ("ERROR " + type(exc).__name__).encode()

def one(target):
    host, port = target.rsplit(":", 1)
    port = int(port)
    out = {"http": [talk(host, port, f"GET {p} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
                    .split(b"\r\n")[0].decode(errors="replace") for p in paths]}
    out["redis"] = talk(host, port, b"*1\r\n$4\r\nPING\r\n").split(b"\r\n")[0].decode(errors="replace")
    body = struct.pack("!I", 196608) + b"user\0postgres\0database\0airflow\0\0"
    reply = talk(host, port, struct.pack("!I", len(body) + 4) + body)
    out["pg"] = f"R{struct.unpack('!I', reply[5:9])[0]}" if reply[:1] == b"R" and len(reply) >= 9 else "no"
    connect = struct.pack("!iqiqi", 0, 0, 30000, 0, 16) + b"\0" * 16 + b"\0"
    zk = talk(host, port, struct.pack("!i", len(connect)) + connect, tls=True)
    out["zk"] = "session" if zk and not zk.startswith(b"ERROR") and len(zk) >= 20 else "none"
    return target, out

with ThreadPoolExecutor(16) as pool:
    print(json.dumps(dict(pool.map(one, targets))), flush=True)
"""


def cluster_pids(cluster: Any) -> list[int]:
    """Every process of the cluster: each component's process group and all their descendants."""
    import psutil

    from airflow_epochs.spark.loopback import process_group

    found: set[int] = set()
    for pid in cluster.components().values():
        found.update(process_group(pid))
    for pid in list(found):
        try:
            found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
        except psutil.NoSuchProcess:
            continue
    return sorted(found)


def address_of(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s hex address as text (IPv4: one little-endian word; IPv6: four of them)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    return str(ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))))


def loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    mapped = getattr(parsed, "ipv4_mapped", None)
    return bool((mapped or parsed).is_loopback)


def listening_sockets(cluster: Any) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the cluster's processes listen on."""
    return sorted({(address_of(a), port) for a, port in listening_addresses(cluster_pids(cluster))})


def probe(intruder: Intruder | None, sockets: list[tuple[str, int]],
          cert: tuple[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """:data:`PROBE` as ``intruder`` (None: as us, for a control) against ``sockets``, its ZooKeeper
    ConnectRequest with ``cert`` (certificate, key) if given: what each answered, by ``address:port``."""
    import subprocess

    targets = ",".join(f"{address}:{port}" for address, port in sockets)
    argv = ["/usr/bin/python3", "-I", "-c", PROBE, targets, ",".join(cert) if cert else "-", *PROTECTED]
    done = intruder.run(argv, cwd="/", timeout=300) if intruder is not None else \
        subprocess.run(argv, cwd="/", timeout=300, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


class RunningLogWatch:
    """A thread that waits for a ``dag_id`` task to run on a Celery worker (its hostname one of the
    workers' log-server addresses) and reads its log through the API server while it runs.

    ``seen`` ends as (task id, hostname, the API server's answer as text), or None if no task was caught
    running."""

    # (run id, task id, try, the host whose log server holds the log) of the tasks to watch
    SQL = ("SELECT run_id, task_id, try_number, hostname FROM task_instance WHERE dag_id = %s AND state = 'running' "
           "AND hostname = ANY(%s)")

    def __init__(self, cluster: Any, dag_id: str, hosts: tuple[str, ...]) -> None:
        self.cluster, self.dag_id, self.hosts = cluster, dag_id, hosts
        self.seen: tuple[str, str, str] | None = None
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=type(self).__name__, daemon=True)

    def served(self, answer: str, hostname: str) -> bool:
        """Whether the API server's ``answer`` holds the log as ``hostname``'s log server served it."""
        return f"http://{hostname}:" in answer and '"event"' in answer

    def _loop(self) -> None:
        stack = self.cluster.stack
        while self.seen is None and not self.stopping.wait(1.0):
            try:
                for run_id, task_id, try_number, hostname in stack.query(self.SQL, self.dag_id, list(self.hosts)):
                    started = time.monotonic()
                    while time.monotonic() - started < 30 and not self.stopping.is_set():
                        answer = json.dumps(stack.api("GET", f"dags/{self.dag_id}/dagRuns/{run_id}/taskInstances/"
                                                      f"{task_id}/logs/{try_number}?full_content=true"))
                        if self.served(answer, str(hostname)):
                            self.seen = (str(task_id), str(hostname), answer)
                            break
                        time.sleep(1)
                    if self.seen is not None:
                        break
            except Exception as exc:  # noqa: BLE001 - the run goes on (faults kill processes); kept for the test
                self.errors.append(repr(exc))

    def __enter__(self) -> RunningLogWatch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join(60)


class TriggerLogWatch(RunningLogWatch):
    """The same for a deferred ``dag_id`` task: its trigger's log, which only the triggerer running the
    trigger holds (its own log folder), read through the API server from that triggerer's log server
    (the triggerer job's hostname, one of ``hosts``, on ``port``)."""

    SQL = ("SELECT ti.run_id, ti.task_id, ti.try_number, j.hostname FROM task_instance ti JOIN trigger t ON "
           "t.id = ti.trigger_id JOIN job j ON j.id = t.triggerer_id WHERE ti.dag_id = %s AND ti.state = 'deferred' "
           "AND j.hostname = ANY(%s)")

    def __init__(self, cluster: Any, dag_id: str, hosts: tuple[str, ...], port: int) -> None:
        super().__init__(cluster, dag_id, hosts)
        self.port = port

    def served(self, answer: str, hostname: str) -> bool:
        # the source is the triggerer's log server, and the triggerer's own line for the trigger came back
        line = rf"trigger {re.escape(self.dag_id)}/[^ ]+ \(ID \d+\) starting"  # Airflow's TriggerRunner's
        return f"http://{hostname}:{self.port}/log/" in answer and re.search(line, answer) is not None
