"""A warm Spark Connect server on loopback, started from the pyspark wheel (no Spark install needed).

Each epoch's job then costs a ``SparkSession.builder.remote(...)`` call (about half a second) instead
of a JVM start under ``spark-submit``. The server runs the wheel's own ``spark-submit`` with the
Spark Connect server class, bound to 127.0.0.1, in its own process group so that stopping it stops
every process it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from airflow_epochs.embedded_zookeeper import find_java, free_port, stop_pid

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


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
    """

    def __init__(self, directory: str | Path, *, port: int | None = None, master: str = "local[2]",
                 driver_memory: str = "1g", conf: dict[str, str] | None = None) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        self.master = master
        self.driver_memory = driver_memory
        self.conf = dict(conf or {})
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "spark-connect.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def argv(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.local.dir": str(self.directory / "scratch"),
            "spark.sql.shuffle.partitions": "4",
            **self.conf,
        }
        argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "airflow-epochs Spark Connect", "--master", self.master,
                "--driver-memory", self.driver_memory]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return argv

    def start(self, timeout: float = 120.0) -> SparkConnectServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        if listening(self.port):
            raise SparkConnectStartError(f"port {self.port} is already in use")
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_MODE": "0",
               "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(find_java()).resolve().parent.parent)}
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(  # argv list, no shell
                self.argv(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self.directory, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SparkConnectStartError(f"Spark Connect exited with {self.process.returncode}:\n{self.log_tail()}")
            if listening(self.port):
                return self
            time.sleep(0.25)
        self.stop()
        raise SparkConnectStartError(f"Spark Connect not listening on {self.port} after {timeout:g} s:\n"
                                     f"{self.log_tail()}")

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

    def serving(self) -> bool:
        return self.process is not None and self.process.poll() is None and listening(self.port)

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


def stop_server_pid(pid: int) -> bool:
    """Stop a detached server (started by the CLI) and its process group."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return stop_pid(pid)
    return stop_pid(pid)
