"""A throw-away PostgreSQL server for a test: Debian's binaries, loopback only, password (SCRAM)
authentication, its data in a temporary folder; stopped (and its folder left to tmp_path) at the end."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from airflow_stack import postgres_account, postgres_bin

from airflow_epochs.private_files import create_secret_file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """``start()`` runs initdb and the server; ``database(name)`` creates a database; ``stop()``."""

    user = "epochs"

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = _free_port()
        self.password = secrets.token_urlsafe(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.bindir = postgres_bin()

    def _as_postgres(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def start(self) -> PostgresServer:
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server not installed (apt-get install -y postgresql)")
        data, sock = self.base / "pgdata", self.base / "pgsock"
        data.mkdir(parents=True)
        sock.mkdir()
        if os.geteuid() == 0:
            for path in (data, sock):
                shutil.chown(path, "postgres", "postgres")
            for parent in (self.base, *self.base.parents):
                if parent == Path("/"):
                    break
                os.chmod(parent, os.stat(parent).st_mode | 0o011)  # let postgres traverse to its folders
        # The superuser's password, for initdb: 0600 before a byte is written, in a new 0700 folder of the
        # account that reads it (the base folder is 0711 for postgres: a second user polling a file
        # written with the umask there logged in as the superuser while initdb ran).
        pwfile = create_secret_file(self.base / "initdb-secret" / "pwfile", self.password + "\n",
                                    owner=postgres_account())
        try:
            subprocess.run(self._as_postgres([str(self.bindir / "initdb"), "-D", str(data), "-U", self.user,
                                              "--pwfile", str(pwfile), "-A", "scram-sha-256"]),
                           check=True, capture_output=True, timeout=120)
        finally:
            shutil.rmtree(pwfile.parent, ignore_errors=True)
        log = open(self.base / "postgres.log", "ab")  # noqa: SIM115 - kept open with the process
        self.proc = subprocess.Popen(
            self._as_postgres([str(self.bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(self.port),
                               "-k", str(sock), "-c", "fsync=off"]),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while subprocess.run([str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                             capture_output=True).returncode != 0:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError((self.base / "postgres.log").read_text()[-2000:])
            time.sleep(0.3)
        return self

    def database(self, name: str) -> str:
        env = {**os.environ, "PGPASSWORD": self.password}
        subprocess.run([str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name],
                       check=True, capture_output=True, timeout=60, env=env)
        return name

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def running_postgres(*databases: str) -> Iterator[PostgresServer]:
    """A started server with ``databases`` created, in a folder of its own (not under pytest's base
    folder, whose mode other pytest sessions of the machine reset to 0700 while the server runs)."""
    base = Path(tempfile.mkdtemp(prefix="airflow-epochs-pg-"))
    server = PostgresServer(base)
    try:
        server.start()
        for name in databases:
            server.database(name)
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
