"""Issue 35, items 3 and 7: the tests' Airflow deployment (the one ``demo.sh --serve`` runs too) opens no
port another local user can use. A second local user (created and removed by the test) tries every
listening socket of every process the deployment started, and PostgreSQL's Unix socket; and
PostgreSQL asks for a password even of root, who can reach its socket."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from airflow_stack import AirflowStack
from intruder import Intruder, second_user
from listening_sockets import listening_addresses

from airflow_epochs.spark.loopback import process_group

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

# The second user's probe of one TCP port: an HTTP GET of each path given, printing each status line
# (or the error), bounded by a timeout.
HTTP_PROBE = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
for path in sys.argv[3:]:
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(f"GET {path} HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n".encode())
            print(path, s.recv(200).split(b"\\r\\n")[0].decode(errors="replace"), flush=True)
    except OSError as exc:
        print(path, "ERROR", type(exc).__name__, flush=True)
"""

# The second user's try of PostgreSQL's Unix socket.
UNIX_PROBE = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("CONNECTED")
except OSError as exc:
    print("ERROR", type(exc).__name__)
"""

# Paths that need a login; a 2xx on any is a usable port, and a port that does not ask for credentials
# on them (a log server: Airflow binds those to every interface, so the stack starts none) fails too.
PROTECTED = ("/api/v2/dags", "/api/v2/connections", "/api/v2/variables")


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


def _address(hex_address: str) -> str:
    if len(hex_address) == 8:
        return ".".join(str(b) for b in bytes.fromhex(hex_address)[::-1])
    return "::1" if hex_address == "00000000000000000000000001000000" else "::"


def test_the_deployment_opens_no_port_another_user_can_use(intruder, tmp_path, airflow_pg_template):
    import psycopg2

    stack = AirflowStack(tmp_path / "stack", template=airflow_pg_template)
    try:
        stack.start([])
        pids = {name: process_group(proc.pid) for name, proc in stack.procs.items()}
        assert listening_addresses(pids["postgres"]) == set()  # PostgreSQL: no TCP port at all
        ports = listening_addresses([pid for group in pids.values() for pid in group])
        assert ports, "the API server listens somewhere"
        for hex_address, port in sorted(ports):
            address = _address(hex_address)
            assert address in ("127.0.0.1", "::1"), (address, port)  # loopback only
            tried = intruder.run(["/usr/bin/python3", "-I", "-c", HTTP_PROBE, address, str(port), *PROTECTED],
                                 cwd="/", timeout=120)
            answers = [line.split(" ", 1)[1] for line in tried.stdout.splitlines()]
            assert len(answers) == len(PROTECTED), tried
            codes = [answer.split()[1] for answer in answers if answer.startswith("HTTP/")]
            assert not any(code.startswith("2") for code in codes), (port, answers)  # nothing served
            assert {"401", "403"} & set(codes), (port, answers)  # it asked for credentials

        socket_file = stack.pg_socket / f".s.PGSQL.{stack.pg_port}"
        assert socket_file.exists()
        assert os.stat(stack.pg_socket).st_mode & 0o777 == 0o700
        tried = intruder.run(["/usr/bin/python3", "-I", "-c", UNIX_PROBE, str(socket_file)], cwd="/")
        assert tried.stdout.strip() == "ERROR PermissionError", tried
        # root reaches the socket, and still needs the password (no "trust" login as the superuser)
        with pytest.raises(psycopg2.OperationalError, match="password"):
            psycopg2.connect(host=str(stack.pg_socket), port=stack.pg_port, user="postgres", dbname="airflow",
                             connect_timeout=30).close()
        assert stack.query("SELECT 1") == [(1,)]
    finally:
        stack.stop()


def test_the_iceberg_tests_postgresql_asks_for_a_password(intruder):
    """tests/helpers/postgres_server.py (the Iceberg catalog's database) listens on 127.0.0.1 with SCRAM:
    the second user's startup message as the superuser gets a SASL challenge (10), never
    AuthenticationOk (0)."""
    from postgres_server import running_postgres

    startup = """
import socket, struct, sys
body = struct.pack("!I", 196608) + b"user\\0epochs\\0database\\0iceberg\\0\\0"
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20) as s:
    s.sendall(struct.pack("!I", len(body) + 4) + body)
    reply = s.recv(64)
    print(reply[:1].decode(), struct.unpack("!I", reply[5:9])[0])
"""
    with running_postgres("iceberg") as server:
        tried = intruder.run(["/usr/bin/python3", "-I", "-c", startup, str(server.port)], cwd="/")
        assert tried.stdout.split() == ["R", "10"], tried
