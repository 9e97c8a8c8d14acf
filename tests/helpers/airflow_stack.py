"""A real Airflow deployment on loopback for tests and benchmarks: PostgreSQL (Debian's server, run as
the ``postgres`` user), then Airflow's API server, scheduler, triggerer and DAG processor with the
LocalExecutor. Every process is started here, bound to 127.0.0.1, and stopped by its process group.

PostgreSQL's data and socket live in a folder of their own made with ``mkdtemp`` (removed by ``stop()``),
not under ``base``: another pytest session of the machine resets pytest's base folder to 0700 while
this server runs, and the ``postgres`` user could then no longer reach its files. The logs stay in
``base``.

PostgreSQL opens no TCP port: it listens only on a Unix socket in its own folder (0700, the server's
account), and asks for a password generated for the stack (SCRAM), kept beside a template as a 0600
file so that copies of the template open with it. No other local user reaches it.

Every process of one stack gets the same Fernet key, JWT secret and API secret key, made for this stack
(``airflow_secrets``): left unset, each Airflow process makes up its own, and a trigger runner on
another key than the process that stored a trigger cannot read its kwargs.

(The triggerer on SQLite was seen here to reuse a trigger id and never run the trigger: PostgreSQL.)
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from airflow_secrets import deployment_secrets

from airflow_epochs.private_files import create_secret_file

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(process: object) -> float:
    """CPU seconds used by ``process`` (a ``psutil.Process``) and its live children (0 once it is gone)."""
    import psutil

    assert isinstance(process, psutil.Process)
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for member in tree:
        with contextlib.suppress(psutil.Error):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def postgres_account() -> tuple[int, int] | None:
    """The uid and gid PostgreSQL's programs run as: the ``postgres`` account when we are root (they
    refuse to run as root), else None (our own)."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


class AirflowStack:
    """PostgreSQL + api-server + scheduler + triggerer + dag-processor in ``base``."""

    def __init__(self, base: Path, *, env: dict[str, str] | None = None, template: Path | None = None) -> None:
        """``template``: a stopped PostgreSQL data folder holding a migrated metadata database
        (``migrated_template``); the stack's server runs on a copy of it instead of a new, empty one."""
        self.base = base
        self.extra_env = dict(env or {})
        self.secrets = deployment_secrets()  # one set for every process of this deployment, never logged
        self.template = template
        self.pg_port = _free_port()
        self.api_port = _free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.spawned_at: dict[str, float] = {}  # the latest start of each component (wall clock)
        self.launches: dict[str, tuple[list[str], dict[str, str], Path | None]] = {}  # how each was started
        self.pg_folder: Path | None = None  # made by start_postgres(), removed by stop()
        # a template's server asks for the password it was made with (kept beside it, 0600)
        self.pg_password = (template_password(template).read_text().strip() if template is not None
                            else secrets.token_urlsafe(24))
        self.home = base / "airflow"
        self.dags = self.home / "dags"
        self._token: str | None = None  # the API server's bearer token for its admin (see api())

    # -- PostgreSQL ----------------------------------------------------------------------------

    def _as_postgres(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def start_postgres(self) -> None:
        bindir = postgres_bin()
        if bindir is None:
            raise RuntimeError("PostgreSQL server not installed (apt-get install -y postgresql)")
        self.base.mkdir(parents=True, exist_ok=True)
        self.pg_folder = Path(tempfile.mkdtemp(prefix="airflow-epochs-stack-pg-"))
        data = self.pg_data
        if self.template is None:
            data.mkdir()
        else:
            # -a keeps the postgres user's ownership and the folder's 0700 mode, which the server checks.
            subprocess.run(["cp", "-a", str(self.template), str(data)], check=True, capture_output=True, timeout=120)
        sock = self.pg_folder / "pgsock"
        sock.mkdir(mode=0o700)  # its Unix socket is the only way in: the server's account alone
        if os.geteuid() == 0:
            shutil.chown(data, "postgres", "postgres")
            shutil.chown(sock, "postgres", "postgres")
            # mkdtemp's folder is 0700: let postgres traverse it (only traverse: it lists nothing here)
            os.chmod(self.pg_folder, 0o711)
        if self.template is None:
            # 0600 before a byte is written, in a new 0700 folder of the account that reads it: the stack's
            # folder is 0711 for postgres, where a file written with the umask was another user's to read.
            pwfile = create_secret_file(self.pg_folder / "initdb-secret" / "pwfile", self.pg_password + "\n",
                                        owner=postgres_account())
            initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "scram-sha-256", "-U", "postgres",
                      "--pwfile", str(pwfile)]
            try:
                subprocess.run(self._as_postgres(initdb), check=True, capture_output=True, timeout=120)
            finally:
                shutil.rmtree(pwfile.parent, ignore_errors=True)
        log = open(self.base / "postgres.log", "ab")  # noqa: SIM115 - kept open with the process
        self.procs["postgres"] = subprocess.Popen(  # -h '': no TCP at all; the socket folder is 0700
            self._as_postgres([str(bindir / "postgres"), "-D", str(data), "-h", "", "-p", str(self.pg_port),
                               "-k", str(sock), "-c", "unix_socket_permissions=0700", "-c", "max_connections=200",
                               "-c", "fsync=off"]),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            ready = subprocess.run([str(bindir / "pg_isready"), "-h", str(sock), "-p", str(self.pg_port)],
                                   capture_output=True)
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError((self.base / "postgres.log").read_text()[-2000:])
            time.sleep(0.3)
        if self.template is None:
            subprocess.run([str(bindir / "createdb"), "-h", str(sock), "-p", str(self.pg_port), "-U", "postgres",
                            "airflow"], check=True, capture_output=True, timeout=60,
                           env={**os.environ, "PGPASSWORD": self.pg_password})

    @property
    def pg_socket(self) -> Path:
        """The folder of the server's Unix socket (its only way in)."""
        if self.pg_folder is None:
            raise RuntimeError("PostgreSQL has not been started")
        return self.pg_folder / "pgsock"

    @property
    def pg_data(self) -> Path:
        """The server's data folder (inside the stack's own PostgreSQL folder)."""
        if self.pg_folder is None:
            raise RuntimeError("PostgreSQL has not been started")
        return self.pg_folder / "pgdata"

    # -- Airflow -------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
        return {
            **base,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN":  # the Unix socket only (the server opens no TCP port)
                f"postgresql+psycopg2://postgres:{self.pg_password}@/airflow?host={self.pg_socket}&port={self.pg_port}",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.api_port}",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),  # not served (see spawn)
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            # A task's calls to the API server wait as long as the server's own request timeout (120 s)
            # instead of Airflow's 5 s: a task start the client gave up on is still applied when a stalled
            # server wakes, so the client's retry is refused and the started task fails (seen under a
            # load average of 37: the first start call answered after 50 s).
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "120",
            **self.secrets,
            **self.extra_env,
        }

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(Path(sys.executable).parent / "airflow"), *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, dag_files: list[Path], *, setup: list[list[str]] | None = None) -> AirflowStack:
        """Start everything with ``dag_files`` (files or folders) in the DAGs folder; ``setup``: airflow
        commands (argv lists) to run after the database is migrated, before the components start."""
        self.start_postgres()
        self.dags.mkdir(parents=True)
        for path in dag_files:
            if path.is_dir():
                shutil.copytree(path, self.dags / path.name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(path, self.dags / path.name)
        if self.template is None:
            self.migrate()
        for argv in setup or ():
            done = self.airflow(*argv)
            if done.returncode:
                raise RuntimeError(f"airflow {' '.join(argv)}: {done.stderr[-3000:]}")
        for name, argv in (("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(self.api_port)]),
                           ("dag-processor", ["dag-processor"]), ("scheduler", ["scheduler"]),
                           ("triggerer", ["triggerer"])):
            self.spawn(name, argv)
        # Bounded by the CPU the API server has used, not by the clock: at a load average of 37 it was
        # still starting after 120 s (a soak run's failure), while one that has burnt 120 CPU-seconds
        # without answering is broken (it is healthy after about 7 CPU-seconds here). The clock bound
        # only catches a server that never gets CPU at all.
        import psutil

        server = psutil.Process(self.procs["api-server"].pid)
        deadline = time.monotonic() + 900
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health",
                                            timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or _cpu_seconds(server) > 120:
                raise RuntimeError(self.log_tail("api-server"))
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited:\n{self.log_tail(name)}")
            time.sleep(0.5)
        return self

    # -- the REST API (one HTTP request instead of an `airflow` process: seconds saved a call) ----------

    def api(self, method: str, path: str, body: object = None, *, timeout: float = 60) -> object:
        """``method`` on the API server's ``/api/v2/<path>`` as the simple auth manager's admin (its
        password is the one the API server generated into AIRFLOW_HOME); the decoded answer.

        :raises RuntimeError: an answer other than 2xx, with its status and body.
        """
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}/api/v2/{path.lstrip('/')}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self._api_token()}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:2000]}") \
                from None
        return json.loads(text) if text else None

    def _api_token(self) -> str:
        if self._token is None:
            passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.api_port}/auth/token", method="POST",
                data=json.dumps({"username": "admin", "password": passwords["admin"]}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                self._token = str(json.loads(answer.read())["access_token"])
        return self._token

    def trigger(self, dag_id: str, conf: dict[str, object] | None = None) -> str:
        """A manual run of ``dag_id`` with ``conf`` (as ``airflow dags trigger -c``); its run id."""
        run = self.api("POST", f"dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        assert isinstance(run, dict)
        return str(run["dag_run_id"])

    def unpause(self, dag_id: str) -> None:
        """Unpause ``dag_id`` (as ``airflow dags unpause``)."""
        self.api("PATCH", f"dags/{dag_id}", {"is_paused": False})

    def migrate(self) -> None:
        migrated = self.airflow("db", "migrate", timeout=600)
        if migrated.returncode:
            raise RuntimeError(migrated.stderr[-3000:])

    def spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``airflow <argv>`` as component ``name`` (e.g. a second triggerer), logging to ``<name>.log``;
        ``env`` (default :attr:`env`) and ``cwd`` for a process that keeps its own (a Celery worker)."""
        if argv[:1] in (["scheduler"], ["triggerer"]) and "--skip-serve-logs" not in argv:
            # Airflow's log servers bind every interface (no setting moves them); on one machine the API
            # server reads the log files directly, so none is started.
            argv = [*argv, "--skip-serve-logs"]
        env = self.env if env is None else env
        self.launches[name] = (argv, env, cwd)
        log = open(self.base / f"{name}.log", "ab")  # noqa: SIM115 - kept open with the process
        self.spawned_at[name] = time.time()
        self.procs[name] = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), *argv], env=env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        return self.procs[name]

    def respawn(self, name: str) -> subprocess.Popen[bytes]:
        """Start component ``name`` again as it was last started (as a process supervisor would)."""
        argv, env, cwd = self.launches[name]
        return self.spawn(name, argv, env=env, cwd=cwd)

    def watcher_triggerer(self, names: tuple[str, ...] = ("triggerer", "triggerer-2")) -> str | None:
        """Which of the triggerers ``names`` runs the asset watcher's trigger, or None while no running
        triggerer job does. A job is the process of the name whose latest start came last before the job
        started (start order alone misnames the survivor once Airflow marks a killed triggerer's job
        failed, and a respawn under the same name starts a new job)."""
        owner = self.query("SELECT j.start_date, j.state FROM trigger t JOIN asset_watcher w ON w.trigger_id = t.id "
                           "JOIN job j ON j.id = t.triggerer_id")
        if not owner or owner[0][1] != "running":
            return None
        job_started = owner[0][0].timestamp()  # type: ignore[attr-defined]  # a timestamptz: an aware datetime
        before = [(at, name) for name, at in self.spawned_at.items() if name in names and at <= job_started]
        return max(before)[1] if before else None

    def running(self, *names: str) -> None:
        """Fail, with its log, if any component ``names`` has exited (e.g. a triggerer whose trigger
        runner died: Airflow then ends the whole triggerer)."""
        for name in names:
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                raise AssertionError(f"{name} is not running (exit {None if proc is None else proc.returncode}):\n"
                                     f"{self.log_tail(name)}")

    def trigger_runner(self, name: str) -> int:
        """The pid of triggerer ``name``'s trigger runner: the child of its process that listens on no port
        (the other child is the triggerer's log server)."""
        import psutil

        parent = psutil.Process(self.procs[name].pid)
        runners = [child for child in parent.children()
                   if not [c for c in child.net_connections("tcp") if c.status == psutil.CONN_LISTEN]]
        if len(runners) != 1:
            raise AssertionError(f"{name}: expected one trigger runner among its children, found {runners}")
        return int(runners[0].pid)

    def kill(self, name: str) -> None:
        """SIGKILL a component's whole process group, as a crash would."""
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(20)

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 180) -> None:
        """Wait until the DAG processor has stored ``dag_ids`` (serialised, so the scheduler can run them).

        Read from the metadata database, not with ``airflow dags list``: each CLI call starts a Python
        process that imports Airflow (about 5 s of CPU), which took over 120 s on a 2-core machine with
        a load average of 30, and a timed-out poll then failed the test while the DAGs were there."""
        deadline = time.monotonic() + timeout
        while True:
            found = {str(row[0]) for row in self.query("SELECT dag_id FROM serialized_dag WHERE dag_id = ANY(%s)",
                                                       list(dag_ids))}
            if set(dag_ids) <= found:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"DAGs {sorted(set(dag_ids) - found)} not parsed:\n{self.log_tail('dag-processor')}")
            time.sleep(2)

    def runs(self, dag_id: str) -> list[dict[str, str]]:
        """The runs of ``dag_id``, newest first, each with ``run_id``, ``state``, ``run_type`` and
        ``partition_key`` (from the metadata database, as :meth:`wait_for_dags` and for the same reason)."""
        rows = self.query("SELECT run_id, state, run_type, partition_key FROM dag_run WHERE dag_id = %s "
                          "ORDER BY id DESC", dag_id)
        return [{"dag_id": dag_id, "run_id": str(run_id), "state": str(state), "run_type": str(run_type),
                 "partition_key": "" if key is None else str(key)} for run_id, state, run_type, key in rows]

    def wait_for_successes(self, dag_id: str, count: int, timeout: float) -> list[dict[str, str]]:
        """:meth:`runs` of ``dag_id`` once ``count`` of them succeeded; fails at once on a failed run, and
        after ``timeout`` seconds, with the scheduler's (and the triggerer's) log."""
        deadline = time.monotonic() + timeout
        while True:
            runs = self.runs(dag_id)
            if len([r for r in runs if r["state"] == "success"]) >= count:
                return runs
            assert not [r for r in runs if r["state"] == "failed"], (runs, self.log_tail("scheduler"))
            assert time.monotonic() < deadline, (runs, self.log_tail("scheduler"), self.log_tail("triggerer"))
            time.sleep(3)

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Rows from the metadata database (for what the CLI does not print, e.g. partition keys)."""
        import psycopg2

        with psycopg2.connect(host=str(self.pg_socket), port=self.pg_port, user="postgres", dbname="airflow",
                              password=self.pg_password) as conn, \
                conn.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def log_tail(self, name: str, chars: int = 3000) -> str:
        try:
            return (self.base / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop every process, then remove the PostgreSQL folder."""
        self.stop_processes()
        if self.pg_folder is not None:
            shutil.rmtree(self.pg_folder, ignore_errors=True)
            self.pg_folder = None

    def stop_processes(self) -> None:
        core = ("scheduler", "triggerer", "dag-processor", "api-server", "postgres")
        for name in (*[n for n in self.procs if n not in core], *core):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGINT if name != "postgres" else signal.SIGTERM)
                proc.wait(20)
            except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def migrated_template(base: Path) -> Path:
    """A stopped PostgreSQL data folder in ``base`` holding Airflow's migrated metadata database, for
    ``AirflowStack(template=...)``: each stack then copies it (a second or two) instead of running
    initdb and ``airflow db migrate`` (about half a minute), and still runs a server of its own."""
    builder = AirflowStack(base)
    try:
        builder.start_postgres()
        builder.migrate()
        builder.stop_processes()  # a clean shutdown: the copies start without recovery
        # kept in base (a stopped server's files are only copied, as root, so base's mode does not matter)
        subprocess.run(["cp", "-a", str(builder.pg_data), str(base / "pgdata")], check=True, capture_output=True,
                       timeout=120)
        fd = os.open(template_password(base / "pgdata"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(builder.pg_password + "\n")
    finally:
        builder.stop()
    return base / "pgdata"


def template_password(template: Path) -> Path:
    """The 0600 file beside a template data folder holding its server's password."""
    return template.parent / f"{template.name}.password"
