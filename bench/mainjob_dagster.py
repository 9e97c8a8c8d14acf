"""Dagster for the ``mainjob`` group: its own virtualenv, a local instance on the Airflow deployment's
PostgreSQL server (a database of its own), and Dagster's daemon running an asset backfill.

Why a virtualenv of its own: Dagster 1.13.27 pins ``protobuf<7`` and ``python-dateutil<3``, and installing
it beside Airflow 3.3.2 would downgrade the project's protobuf 7 and python-dateutil 4 (pip resolves it,
and every Airflow test would then run on other versions). The side venv holds only Dagster's packages
(the ``bench`` extra's pins in pyproject.toml); a ``.pth`` line then adds the project's venv after its
own, so pyspark, pandas and the job files' ``airflow_epochs.spark`` come from there, on Dagster's
protobuf.

The daemon (``dagster-daemon run``) opens no TCP port: its code server listens on a Unix socket in a
private temporary folder, and no webserver is started (the backfill is added to the instance by
``dagster_mainjob/backfill.py`` as the webserver's backfill button does).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CODE = HERE / "dagster_mainjob"


def pins() -> list[str]:
    """The ``bench`` extra of pyproject.toml: Dagster's packages, pinned."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(project["project"]["optional-dependencies"]["bench"])


def ensure_venv(folder: Path) -> Path:
    """The Dagster venv in ``folder`` (made and installed once per set of pins); its python."""
    wanted = pins()
    stamp = folder / "pins.stamp"
    digest = hashlib.sha256(("\n".join(wanted) + sys.prefix).encode()).hexdigest()
    python = folder / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, timeout=300)
    done = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *wanted],
                          capture_output=True, text=True, timeout=1200)
    if done.returncode:
        raise RuntimeError(f"installing {wanted} into {folder}: {done.stderr[-3000:]}")
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # After Dagster's own packages (addsitedir appends), so its pins win; the project's editable install
    # is a .pth of that folder, which addsitedir processes.
    project = sysconfig.get_paths()["purelib"]
    Path(own, "zz_project_venv.pth").write_text(f"import site; site.addsitedir({project!r})\n")
    stamp.write_text(digest)
    return python


def create_database(stack: Any, name: str) -> str:
    """A database ``name`` on the stack's PostgreSQL server; its SQLAlchemy URL (over the Unix socket)."""
    import psycopg2

    conn = psycopg2.connect(host=str(stack.pg_socket), port=stack.pg_port, user="postgres", dbname="airflow",
                            password=stack.pg_password)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")
    finally:
        conn.close()
    return f"postgresql+psycopg2://postgres:{stack.pg_password}@/{name}?host={stack.pg_socket}&port={stack.pg_port}"


INSTANCE = """\
storage:
  postgres:
    postgres_url:
      env: DAGSTER_PG_URL
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 3
telemetry:
  enabled: false
"""


class DagsterDeployment:
    """A local Dagster instance in ``base`` with its daemon: ``start()``, ``backfill(...)``, ``stop()``.

    :param python: the Dagster venv's interpreter (:func:`ensure_venv`).
    :param env: the settings the assets read (``MAINJOB_*``) and ``DAGSTER_PG_URL``.
    """

    def __init__(self, base: Path, *, python: Path, env: dict[str, str]) -> None:
        self.base = base
        self.python = python
        self.home = base / "home"
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSTER"))},
                    "DAGSTER_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "TMPDIR": str(base / "tmp"), **env}
        self.daemon: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, mode=0o700)
        (self.base / "tmp").mkdir(mode=0o700)
        (self.home / "dagster.yaml").write_text(INSTANCE)
        (self.base / "workspace.yaml").write_text(json.dumps({"load_from": [{"python_file": {
            "relative_path": str(CODE / "definitions.py"), "working_directory": str(CODE)}}]}))
        log = open(self.base / "daemon.log", "ab")  # noqa: SIM115 - kept open with the process
        self.daemon = subprocess.Popen([str(self.python.parent / "dagster-daemon"), "run", "-w",
                                        str(self.base / "workspace.yaml")], env=self.env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, cwd=self.base)

    @property
    def pid(self) -> int | None:
        return None if self.daemon is None else self.daemon.pid

    def backfill(self, days: int, *, timeout: float, partitions: str = "", assets: str = "",
                 subset: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
        """Run an asset backfill through the daemon and wait for it; what the instance recorded."""
        out = self.base / f"backfill-{time.monotonic_ns()}.json"
        argv = [str(self.python), str(CODE / "backfill.py"), str(days), str(out), "--timeout", str(timeout)]
        if partitions:
            argv += ["--partitions", partitions]
        if assets:
            argv += ["--assets", assets]
        if subset:
            argv += ["--subset", json.dumps(subset)]
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout + 300)
        if not out.exists():
            raise RuntimeError(f"the backfill wrote nothing: {done.stderr[-3000:]}\n{self.log_tail()}")
        result: dict[str, Any] = json.loads(out.read_text())
        result["exit"] = done.returncode
        return result

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.base / "daemon.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.daemon is None or self.daemon.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.daemon.pid, signal.SIGTERM)
        try:
            self.daemon.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait(10)
