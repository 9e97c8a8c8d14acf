"""Issue 35, item 1: no Spark Connect token for a squatter on a loopback address. Clients name
``localhost``, which gRPC resolves to ``[::1]`` first; the server binds 127.0.0.1. Each attack runs as a
throw-away second local user (created and removed by the test) that listens where our clients might
connect and counts the connections it accepts."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
from intruder import Intruder, second_user

from airflow_epochs.spark.connect import connect_mode, open_session
from airflow_epochs.spark.loopback import UntrustedListener, check_listener

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# The squatter: listens on ADDRESS:PORT, accepts for SECONDS and prints how many connections it got.
SQUATTER = """
import socket, sys, time
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(family)
try:
    s.bind((sys.argv[1], int(sys.argv[2])))
except OSError as exc:
    print("BIND", exc.errno, flush=True)
    raise SystemExit(0)
s.listen(16)
s.settimeout(0.2)
print("LISTENING", flush=True)
got = 0
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    try:
        c, _ = s.accept()
        got += 1
        c.close()
    except OSError:
        pass
print("ACCEPTED", got, flush=True)
"""


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


def _squat(intruder: Intruder, address: str, port: int, seconds: float) -> subprocess.Popen[str]:
    """The second user listening on ``address:port`` for ``seconds`` (bounded: it stops by itself)."""
    proc = intruder.popen(["/usr/bin/python3", "-I", "-c", SQUATTER, address, str(port), str(seconds)],
                          stdout=subprocess.PIPE, text=True, cwd="/")
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    assert first == "LISTENING", first
    return proc


def _accepted(proc: subprocess.Popen[str]) -> int:
    out, _ = proc.communicate(timeout=60)
    return int(out.split("ACCEPTED")[1].split()[0])


def _free_port_on_both() -> int:
    for _ in range(50):
        with socket.socket() as v4:
            v4.bind(("127.0.0.1", 0))
            port = int(v4.getsockname()[1])
            with socket.socket(socket.AF_INET6) as v6:
                try:
                    v6.bind(("::1", port))
                except OSError:
                    continue
        return port
    raise RuntimeError("no port free on both loopback addresses")


class _RecordingServer:
    """A plain gRPC server of ours on 127.0.0.1 that records the authorization each call carries
    (a stand-in for Spark Connect: it answers every method with an error)."""

    def __init__(self, port: int) -> None:
        import grpc

        self.seen: list[str] = []

        class Handler(grpc.GenericRpcHandler):
            def service(inner, details):
                self.seen.append(dict(details.invocation_metadata).get("authorization", ""))
                return None

        self.server = grpc.server(futures.ThreadPoolExecutor(2))
        self.server.add_generic_rpc_handlers((Handler(),))
        self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0)


def _one_call(url: str, *, pinned: bool) -> None:
    from pyspark.sql.connect.session import SparkSession

    with connect_mode():
        session = open_session(url) if pinned else SparkSession.builder.remote(url).create()
        try:
            session.range(1).count()
        except Exception:  # noqa: BLE001 - the stand-in answers no Spark method: the call is what counts
            pass
        finally:
            session.stop()


def test_a_squatter_on_ipv6_loopback_gets_no_connection_from_our_clients(intruder, monkeypatch):
    """The attack: the second user listens on [::1]:PORT while our server listens on 127.0.0.1:PORT.
    pyspark's own client, given ``sc://localhost`` and a token, connects to the squatter (the control:
    the attack is real on this machine); ours connects to 127.0.0.1 only, once checked, and the token
    reaches our server."""
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    port = _free_port_on_both()
    ours = _RecordingServer(port)
    url = f"sc://localhost:{port}/;token=secret-token-0123456789"
    try:
        squatter = _squat(intruder, "::1", port, 40)
        _one_call(url, pinned=True)
        assert ours.seen and all(seen == "Bearer secret-token-0123456789" for seen in ours.seen), ours.seen
        assert _accepted(squatter) == 0

        control = _squat(intruder, "::1", port, 40)
        _one_call(url, pinned=False)
        assert _accepted(control) >= 1  # pyspark alone goes to [::1] first
    finally:
        ours.stop()


def test_a_squatter_on_the_port_itself_is_refused_before_anything_is_sent(intruder, monkeypatch):
    """Our server is down and the second user took 127.0.0.1:PORT (and [::1]:PORT): the client refuses,
    naming the squatter's uid, and the squatter sees no connection."""
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    port = _free_port_on_both()
    squatters = [_squat(intruder, address, port, 15) for address in ("127.0.0.1", "::1")]
    for host in ("localhost", "127.0.0.1", "[::1]"):
        with pytest.raises(UntrustedListener, match=f"uid {intruder.uid}"):
            _one_call(f"sc://{host}:{port}/;token=secret-token-0123456789", pinned=True)
    assert [_accepted(proc) for proc in squatters] == [0, 0]


def test_a_listener_outside_the_server_process_group_is_refused():
    """Even a socket of our own account is refused when the caller knows the server's process group
    and the socket is not one of its processes'."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        with pytest.raises(UntrustedListener, match="process group"):
            check_listener("127.0.0.1", other.getsockname()[1], server_group=os.getpid() + 10_000_000)


def test_the_server_holds_both_loopback_addresses(intruder, spark_connect_server, spark_connect_state,
                                                 monkeypatch):
    """The server started by the CLI keeps [::1]:PORT (a bound socket its own process holds; the
    session fixture checks the port is free again after ``stop``), so no other user can listen there;
    pyspark's plain ``sc://localhost`` client (any client's, not only ours) is refused at [::1] at once
    and reaches the server on 127.0.0.1."""
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    port = spark_connect_server
    for address in ("::1", "127.0.0.1"):
        tried = intruder.run(["/usr/bin/python3", "-I", "-c", SQUATTER, address, str(port), "0"], cwd="/")
        assert tried.stdout.split()[:2] == ["BIND", str(errno.EADDRINUSE)], tried
    token = (spark_connect_state / "spark-connect" / "token").read_text().strip()
    started = time.monotonic()
    from pyspark.sql.connect.session import SparkSession

    with connect_mode():
        session = SparkSession.builder.remote(f"sc://localhost:{port}/;token={token}").create()
        try:
            assert session.range(4).count() == 4
        finally:
            session.stop()
    assert time.monotonic() - started < 120


def test_status_uses_the_checked_address(spark_connect_server, spark_connect_state):
    """``status`` (its probe is our client) answers through the pinned, checked address."""
    cli = [str(Path(sys.executable).parent / "airflow-epochs"), "--state-dir", str(spark_connect_state),
           "spark-connect", "status", "--probe-timeout", "240"]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=300, cwd="/")
    assert done.returncode == 0 and "answered a query" in done.stdout, done
