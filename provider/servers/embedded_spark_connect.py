"""A warm Spark Connect server on loopback, started from the pyspark wheel (no Spark install needed).

Each epoch's job then costs a ``SparkSession.builder.remote(...)`` call (about half a second) instead
of a JVM start under ``spark-submit``. The server runs the wheel's own ``spark-submit`` with the
Spark Connect server class, bound to 127.0.0.1, in its own process group so that stopping it stops
every process it started.

Secure by default: the server requires a token (``SPARK_CONNECT_AUTHENTICATE_TOKEN``, passed in its
environment, never on its command line), generated with :mod:`secrets` and kept in a 0600 file in the
server's 0700 folder, or given by the caller (e.g. from an Airflow connection). Without it any local
user could run code as the server's user. Clients send it in the URL, ``sc://localhost:PORT/;token=T``:
the host must be literally ``localhost`` for pyspark to send a token over plain loopback gRPC (with
any other host a token switches the client to TLS, which this server does not serve).

The gRPC port is not the only one the server opens: its driver also listens for Spark's internal RPC
and block transfers. Those are authenticated too (a SASL handshake before any message), with Spark's
own ``spark.authenticate`` machinery; every port binds to loopback. With a local master Spark itself
generates the secret when the driver starts and keeps it in the driver's memory (it ignores a
configured one, so none is configured: a configured secret is part of the SparkConf, which Spark
writes into its log with a slow listener's event on a busy machine); other masters need a configured
secret, so one is generated here for each start, kept in a 0600 properties file in the server's folder
and passed with ``--properties-file`` (never on the command line; such a secret can still reach the
log that way, which is the server's 0600 file). Without authentication, any local user could send the
driver a ``StopBlockManagerMaster`` and break its SparkContext
(``test_a_forged_stop_block_manager_master_from_another_user_is_refused``).
:meth:`SparkConnectServer.healthy` then asks the server for a real query, because a live pid and a
listening port do not mean the SparkContext still works.

Clients name ``localhost``, which gRPC resolves to ``::1`` first, and Spark Connect binds one address
(127.0.0.1). So that no other user can listen on ``[::1]:PORT`` and collect tokens from any
``sc://localhost`` client, the server also holds ``[::1]:PORT``: a socket bound there (not listening,
so a connection is refused at once and gRPC goes on to 127.0.0.1) is handed to the server's process,
which keeps it exactly as long as it lives. Our own clients also connect to 127.0.0.1 exactly, once
they have checked that the socket there is the server's (:func:`airflow_epochs.spark.connect.open_session`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from airflow_epochs.private_files import (
    check_private_dir,
    open_private_log,
    private_dir,
    read_private,
    tighten,
    write_private,
)
from airflow_epochs.process_identity import ProcessIdentity, identify, launch_environment
from airflow_epochs.servers.die_with_parent import launcher
from airflow_epochs.servers.embedded_zookeeper import find_java, free_port
from airflow_epochs.spark.loopback import LOOPBACK_V6, UntrustedListener, check_listener

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # noqa: S105 - a variable name
TOKEN_FILE = "token"  # noqa: S105 - a file name
AUTH_PROPERTIES_FILE = "spark-auth.properties"
PROBE_TIMEOUT = 60.0


class SparkConnectStartError(RuntimeError):
    """The server did not start listening; the message carries the end of its log."""


def spark_home() -> Path:
    """The pyspark wheel's folder, which is a complete Spark distribution (bin/, jars/, sbin/)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkConnectStartError("pyspark is not installed")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-submit").exists():
        raise SparkConnectStartError(f"{home} has no bin/spark-submit")
    return home


def hold_ipv6_loopback(port: int) -> socket.socket | None:
    """A socket bound (not listening) to ``[::1]:port``, inheritable so that the server keeps it; None
    where this machine has no IPv6 loopback (then nobody can listen there either).

    :raises SparkConnectStartError: another socket holds ``[::1]:port`` already.
    """
    try:
        held = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        held.bind((LOOPBACK_V6, port))
    except OSError as exc:
        held.close()
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            return None
        raise SparkConnectStartError(f"port {port} is already in use on [::1]") from None
    held.set_inheritable(True)
    return held


def listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class SparkConnectServer:
    """A Spark Connect server process.

    :param directory: where its log (and Spark's local scratch space) go.
    :param port: gRPC port (a free one by default).
    :param master: the Spark master it runs on (``local[2]`` by default).
    :param driver_memory: the server JVM's heap.
    :param conf: further Spark settings (``key -> value``), passed as ``--conf`` pairs.
    :param token: the token clients must send; by default the one in ``<directory>/token`` (so that
        connections configured with it keep working across restarts), else a new one.
    :param bind_address: where the gRPC port listens (loopback unless told otherwise; remote clients
        send their token over TLS, which needs a TLS-terminating proxy in front of this server).
    :param die_with_parent: the server stops when this process exits, even by ``kill -9`` (Linux;
        start it from a thread that lives as long as the run, see :mod:`airflow_epochs.servers.die_with_parent`).
    :param auth_secret: the internal RPC secret (``spark.authenticate.secret``) to use; by default a
        new one for each start. A standalone master and its workers started with ``spark.authenticate``
        admit only a driver holding their secret: give it here to attach the server to them.
    """

    def __init__(self, directory: str | Path, *, port: int | None = None, master: str = "local[2]",
                 driver_memory: str = "1g", conf: dict[str, str] | None = None, token: str | None = None,
                 bind_address: str = "127.0.0.1", die_with_parent: bool = False,
                 auth_secret: str | None = None) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        self.master = master
        self.driver_memory = driver_memory
        self.conf = dict(conf or {})
        self.die_with_parent = die_with_parent
        self.bind_address = bind_address
        if token is not None and (len(token) < 16 or any(not ch.isprintable() or ch in ";/ " for ch in token)):
            raise ValueError("a Spark Connect token needs at least 16 printable characters, without ';', '/' or "
                             "spaces")
        self.token = token or self._stored_token() or secrets.token_urlsafe(32)
        if auth_secret is not None and (len(auth_secret) < 16 or not auth_secret.isalnum()):
            raise ValueError("a Spark RPC secret needs at least 16 letters or digits")
        self.auth_secret = auth_secret
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def token_file(self) -> Path:
        return self.directory / TOKEN_FILE

    def _stored_token(self) -> str | None:
        """The previous token, adopted only from a 0600 file of ours in a folder of ours (another user
        who planted a token would otherwise know what our server accepts): :class:`UnsafeState` if not."""
        if not os.path.lexists(self.directory):
            return None
        check_private_dir(self.directory)
        try:
            return read_private(self.token_file, secret=True).strip() or None
        except FileNotFoundError:
            return None

    @property
    def host(self) -> str:
        """The host clients name: ``localhost`` for a loopback server (see the module docstring)."""
        return "localhost" if self.bind_address in ("127.0.0.1", "::1", "localhost") else self.bind_address

    @property
    def url(self) -> str:
        """The URL a client connects with, token included: keep it out of logs (see :attr:`display_url`)."""
        return f"sc://{self.host}:{self.port}/;token={self.token}"

    @property
    def display_url(self) -> str:
        """The URL without the token, for messages."""
        return f"sc://{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "spark-connect.log"

    @property
    def properties_file(self) -> Path:
        """The 0600 Spark properties file holding the internal RPC secret (``spark.authenticate.secret``)."""
        return self.directory / AUTH_PROPERTIES_FILE

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def argv(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": self.bind_address,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.blockManager.bindAddress": "127.0.0.1",
            "spark.local.dir": str(self.directory / "scratch"),
            "spark.sql.shuffle.partitions": "4",
            **self.conf,
            "spark.authenticate": "true",  # the secret is in the properties file, never here
        }
        argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "airflow-epochs Spark Connect", "--master", self.master,
                "--driver-memory", self.driver_memory, "--properties-file", str(self.properties_file)]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return argv

    def start(self, timeout: float = 240.0) -> SparkConnectServer:
        private_dir(self.directory)
        tighten(self.directory)
        write_private(self.token_file, self.token + "\n")
        # A new internal RPC secret for each start (only this server's driver and executors share it), for
        # masters that need one configured, unless the cluster it attaches to has one; a local master
        # generates its own in the driver's memory.
        secret = self.auth_secret or secrets.token_hex(32)
        write_private(self.properties_file, "" if self.master.startswith("local") else
                      f"spark.authenticate.secret={secret}\n")
        if listening(self.port, self._probe_host):
            raise SparkConnectStartError(f"port {self.port} is already in use")
        held = hold_ipv6_loopback(self.port) if self.bind_address in ("127.0.0.1", "localhost") else None
        try:
            self._launch(held)
        finally:
            if held is not None:
                held.close()  # the server's process holds its own copy now
        deadline = time.monotonic() + timeout
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SparkConnectStartError(f"Spark Connect exited with {self.process.returncode}:\n{self.log_tail()}")
            if listening(self.port, self._probe_host):
                try:
                    self.check_listener()
                except UntrustedListener as exc:  # another user took the port while the JVM started
                    self.stop()
                    raise SparkConnectStartError(str(exc)) from None
                return self
            time.sleep(0.25)
        self.stop()
        raise SparkConnectStartError(f"Spark Connect not listening on {self.port} after {timeout:g} s:\n"
                                     f"{self.log_tail()}")

    def check_listener(self) -> None:
        """Refuse unless the gRPC port is held by this server's own processes.

        :raises UntrustedListener: another process listens there."""
        if self.process is None:
            raise UntrustedListener(f"the server on port {self.port} is not running")
        check_listener(self._probe_host, self.port, server_group=self.process.pid)

    def _launch(self, held: socket.socket | None) -> None:
        home = spark_home()
        env = launch_environment({  # with the nonce a later stop checks the server by
            **os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_MODE": "0",
            "PYTHONSAFEPATH": "1",  # its Python workers (``-m pyspark.daemon``) import nothing from their folder
            "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(find_java()).resolve().parent.parent),
            TOKEN_ENV: self.token})
        argv = [*launcher(), *self.argv()] if self.die_with_parent else self.argv()
        with open(open_private_log(self.log_file), "ab") as out:
            self.process = subprocess.Popen(  # argv list, no shell; the token only in the environment
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self.directory, start_new_session=True, umask=0o077,
                pass_fds=(held.fileno(),) if held is not None else (),
            )

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None

    @property
    def _probe_host(self) -> str:
        return "127.0.0.1" if self.bind_address in ("0.0.0.0", "localhost") else self.bind_address  # noqa: S104

    def serving(self) -> bool:
        return self.process is not None and self.process.poll() is None and listening(self.port, self._probe_host)

    def healthy(self, timeout: float = PROBE_TIMEOUT) -> tuple[bool, str]:
        """Whether the server answers a real query (``spark.range(3).count()``), and what it said.

        See :func:`probe`."""
        return probe(self.url, timeout=timeout, server_group=self.pid, cwd=self.directory)

    def identity(self) -> ProcessIdentity | None:
        """The running server's process identity (recorded to stop or adopt it safely later)."""
        return identify(self.process.pid) if self.process is not None and self.process.poll() is None else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()



_PROBE_SCRIPT = """
import os, sys
from airflow_epochs.spark.connect import connect_mode, open_session
group = os.environ.pop("AIRFLOW_EPOCHS_PROBE_GROUP", "")
with connect_mode():
    session = open_session(os.environ.pop("AIRFLOW_EPOCHS_PROBE_URL"), server_group=int(group) if group else None)
    try:
        print(int(session.range(3).count()))
    finally:
        session.stop()
"""


def probe(url: str, *, timeout: float = PROBE_TIMEOUT, server_group: int | None = None,
          cwd: str | Path = "/") -> tuple[bool, str]:
    """Ask the Spark Connect server at ``url`` (token included) for a real query, in a child process
    bounded by ``timeout`` (pyspark's client retries for minutes on its own). The URL goes to the child
    through its environment, never its command line. The child runs isolated (``python -I``: nothing
    from the working folder or ``PYTHONPATH`` is imported) in ``cwd``.

    :param server_group: the server's process group: the port must be held by one of its processes.
    :param cwd: the child's working folder (a folder of ours, or ``/``).
    :returns: ``(True, "answered")`` or ``(False, why)`` (the last line of the client's error).
    """
    import sys

    env = {**os.environ, "AIRFLOW_EPOCHS_PROBE_URL": url, "SPARK_CONNECT_MODE": "1",
           "AIRFLOW_EPOCHS_PROBE_GROUP": str(server_group or "")}
    env.pop(TOKEN_ENV, None)
    try:
        done = subprocess.run([sys.executable, "-I", "-c", _PROBE_SCRIPT], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=cwd)
    except subprocess.TimeoutExpired:
        return False, f"no answer to a query within {timeout:g} s"
    if done.returncode == 0 and done.stdout.strip().endswith("3"):
        return True, "answered"
    lines = [line.strip() for line in done.stderr.strip().splitlines() if line.strip()]
    # The error line, not the last frame of a JVM stack trace the client may print after it.
    errors = [line for line in lines if not line.startswith(("at ", "... ", "JVM stacktrace"))]
    return False, ((errors or lines)[-1][:300] if lines else f"the query failed (exit {done.returncode})")
