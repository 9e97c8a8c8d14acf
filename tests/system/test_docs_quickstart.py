"""The quickstart "Into your own Airflow 3" (docs/quickstart/own_airflow.rst), followed literally.

The page shows the steps of ``docs/examples/quickstart.sh`` (each between ``[START name]`` / ``[END name]``
markers, included with ``literalinclude``); this test runs each of those steps, taken from that file, in
the page's order in bash, from a copy of what a clone holds: a fresh virtualenv with the wheel built from
the source, the embedded ZooKeeper, the ``zookeeper`` connection, the first epoch DAG in the DAGs
folder, Airflow's API server, DAG processor, scheduler and triggerer in the background (the page's
second terminal), the three runs, ``airflow-epochs status``, the login and the Epochs page over HTTP,
and the stop. Nothing here types a command of its own into the reader's terminal; what it adds is
where to look (free ports, the run's folder) and the checks.

Airflow runs on the SQLite database a new ``AIRFLOW_HOME`` gets, as a reader trying the provider
has: the triggerer problem seen on SQLite follows a trigger that failed to load, which a correctly
installed provider does not give, and the three deferred openings here do go through the triggerer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from intruder import second_user

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "examples" / "quickstart.sh"
DAG = ROOT / "docs" / "examples" / "quickstart_dag.py"
PAGE = ROOT / "docs" / "quickstart" / "own_airflow.rst"
STEP = re.compile(r"^# \[START (\w+)\]\n(.*?)^# \[END \1\]\n", re.S | re.M)
# The order the page shows them in, and how this test runs each: "background" is the second terminal.
ORDER = ("env", "get", "install", "zookeeper", "zookeeper_values", "connection", "connection_ensemble", "dag",
         "airflow", "runs", "status", "status_ensemble", "login", "stop")
# What a clone holds that the steps use (the wheel's sources and the example DAG)
CLONE = ("pyproject.toml", "README.md", "provider", "operators", "sensors", "docs/examples")


def steps() -> dict[str, str]:
    return {name: body for name, body in STEP.findall(SCRIPT.read_text())}


def test_the_page_includes_every_step_in_order_and_the_test_runs_each():
    """Unit check (no servers): every step is on the page, in the order this test runs them."""
    found = steps()
    assert tuple(found) == ORDER
    included = re.findall(r"\.\. literalinclude:: \.\./examples/quickstart\.sh\n(?:   :[^\n]*\n)*?"
                          r"   :start-after: \[START (\w+)\]\n   :end-before: \[END \1\]", PAGE.read_text())
    assert tuple(included) == ORDER
    # the first epoch DAG: shown from its markers, and copied whole into the DAGs folder by the dag step
    shown = (".. literalinclude:: ../examples/quickstart_dag.py\n         :language: python\n"
             "         :start-after: [START quickstart_dag]\n         :end-before: [END quickstart_dag]")
    assert shown in PAGE.read_text()
    assert ".. literalinclude:: ../examples/quickstart_taskflow.py" in PAGE.read_text()
    assert f"cp docs/examples/{DAG.name} " in found["dag"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Terminal:
    """The reader's terminal: each step runs in bash after the ``env`` step and, once the virtualenv
    exists, its activation (the ``source`` line of the install step), as an open terminal keeps them;
    from the home folder until the ``get`` step has cloned the repository, from the clone after it. The
    terminal's own umask is 022 (``useradd``'s default here): the ``env`` step sets its own."""

    def __init__(self, clone: Path, env: dict[str, str]) -> None:
        self.clone = clone
        self.env = env
        self.found = steps()
        self.activated = False

    def script(self, name: str) -> str:
        prefix = ["set -euo pipefail", "umask 022", self.found["env"]]
        if self.activated:
            prefix += [line for line in self.found["install"].splitlines() if line.startswith("source ")]
        return "\n".join([*prefix, self.found[name]])

    def run(self, name: str, timeout: float = 300, *, fails: bool = False) -> str:
        cwd = self.clone if self.clone.exists() else Path(self.env["HOME"])
        done = subprocess.run(["bash", "-c", self.script(name)], cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if fails:
            assert done.returncode != 0, f"step {name} did not fail:\n{done.stdout[-3000:]}"
            return done.stderr
        assert done.returncode == 0, f"step {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        return done.stdout

    def background(self, name: str, log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(["bash", "-c", self.script(name)], cwd=self.clone, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)


def _clean_environment(home: Path) -> dict[str, str]:
    """A new terminal: no Airflow settings, no virtualenv of ours on PATH, a home of its own (nothing
    lands in the real one), and pip's cache of the machine (a reader's pip has one too)."""
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                                   / "pip")
    ours = str(Path(os.environ.get("VIRTUAL_ENV", "/nonexistent")) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours and
                           not p.endswith("/.venv/bin"))
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON", "VIRTUAL_ENV", "PYTEST"))
            and k not in {"PATH", "HOME"}}
    return {**keep, "PATH": path, "HOME": str(home), "PIP_CACHE_DIR": cache}


def _repository(target: Path) -> None:
    """A git repository of what a clone holds (this working tree's files, committed), for the ``get`` step to
    clone as a reader clones the project's."""
    target.mkdir()
    for name in CLONE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "_build"))
        else:
            shutil.copy(source, target / name)
    git = ["git", "-c", "user.name=quickstart", "-c", "user.email=quickstart@localhost", "-C", str(target)]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the project"]):
        subprocess.run([*git, *argv], check=True, capture_output=True, timeout=120)


def _constraints(path: Path) -> Path:
    """A constraint file for the install step's ``AIRFLOW_CONSTRAINTS``: Airflow publishes one per Airflow
    and Python version on the web, which this machine cannot reach (the package index only); here it is
    the versions the project's own environment runs (``pip freeze``), used the same way."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True, timeout=120).stdout
    path.write_text("".join(line + "\n" for line in frozen.splitlines() if "==" in line))
    return path


def _http(url: str, *, token: str | None = None, data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers={
        **({"Authorization": f"Bearer {token}"} if token else {}),
        **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _wait_healthy(port: int, airflow: subprocess.Popen[bytes], log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if _http(f"http://127.0.0.1:{port}/api/v2/monitor/health")[0] == 200:
                return
        except OSError:
            pass
        assert airflow.poll() is None, f"the airflow step exited:\n{log.read_text()[-3000:]}"
        time.sleep(1)
    raise AssertionError(f"the API server never answered:\n{log.read_text()[-3000:]}")


def _listening(pids: set[int]) -> list[str]:
    """Local addresses the processes ``pids`` listen on (from /proc/net/tcp{,6} and their fds)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.append(fields[1])
    return found


def _group(pid: int) -> set[int]:
    """Every process of ``pid``'s session (the background step and all it started)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == pid:
                    found.add(int(entry))
            except OSError:
                continue
    return found


def _loopback(address: str) -> bool:
    host = address.split(":")[0]
    # 127.0.0.1, ::1, and 127.0.0.1 as an IPv4-mapped IPv6 address (a JVM's socket bound to 127.0.0.1)
    return host in ("0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


@pytest.fixture
def quickstart(tmp_path: Path) -> Iterator[tuple[Terminal, Path, dict[str, int]]]:
    # A home as useradd makes them here: mode 0755, in a folder every local user may pass through (pytest's
    # own temporary folders are 0700: a second user could not even look).
    home = Path(tempfile.mkdtemp(prefix="epochs-quickstart-home-", dir="/tmp"))
    os.chmod(home, 0o755)
    folder = home / "epochs-quickstart"  # the page's default $QUICKSTART
    repository = tmp_path / "repository"
    _repository(repository)
    ports = {"ZK_PORT": _free_port(), "AIRFLOW_PORT": _free_port()}
    env = {**_clean_environment(home), "EPOCHS_REPO": str(repository),
           "AIRFLOW_CONSTRAINTS": str(_constraints(tmp_path / "constraints.txt")),
           **{k: str(v) for k, v in ports.items()}}
    terminal = Terminal(folder / "airflow-provider-epochs", env)
    yield terminal, folder, ports
    # Whatever a failed run left: the Airflow processes (their session) and the embedded ZooKeeper.
    for proc in getattr(terminal, "started", ()):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(20)
    venv_cli = folder / "venv" / "bin" / "airflow-epochs"
    if venv_cli.exists():
        subprocess.run([str(venv_cli), "zookeeper", "stop"], env={**env, "AIRFLOW_EPOCHS_HOME": str(folder / "epochs")},
                       capture_output=True, timeout=120)
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_quickstart_seals_its_first_epochs_under_the_scheduler_and_triggerer(quickstart):
    terminal, folder, ports = quickstart
    timings: dict[str, float] = {}
    started = time.monotonic()

    terminal.run("get", timeout=300)
    assert (terminal.clone / "pyproject.toml").is_file()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"  # the env step's folder mode, on a 0755 home
    out = terminal.run("install", timeout=900)
    timings["install"] = time.monotonic() - started
    assert "airflow-provider-epochs" in out
    # pyspark-client's files over PySpark's were put back: the Python files say the jars' version
    jars = next((folder / "venv").glob("lib/python*/site-packages/pyspark/jars/spark-core_*.jar")).name
    assert re.search(r"^pyspark (\S+)$", out, re.M).group(1) in jars, (out, jars)
    terminal.activated = True
    wheel = next((folder / "dist").glob("airflow_provider_epochs-*.whl"))
    where = subprocess.run([str(folder / "venv" / "bin" / "python"), "-I", "-c",
                            "import airflow_epochs; print(airflow_epochs.__file__)"],
                           capture_output=True, text=True, env=terminal.env, cwd=folder, check=True).stdout
    assert where.startswith(str(folder / "venv")), f"imports from {where}, not from the wheel {wheel.name}"

    out = terminal.run("zookeeper")
    assert f"ZooKeeper started at 127.0.0.1:{ports['ZK_PORT']}" in out
    assert "running at" in out
    values = dict(line.split("=", 1) for line in terminal.run("zookeeper_values").splitlines()
                  if "=" in line and not line.startswith("#"))
    terminal.run("connection")
    # The optional ensemble block run as written with its variables unset: a clear error, and no
    # connection stored (before, it stored an empty one and step 7 failed).
    error = terminal.run("connection_ensemble", fails=True)
    assert "set ZK_HOSTS, ZK_USER, ZK_CA, ZK_CERT and ZK_KEY first" in error, error
    missing = _airflow(folder, terminal, "connections", "get", "zookeeper_ensemble")
    assert missing.returncode != 0, missing.stdout
    # Then as a reader with an ensemble of their own fills it in, here with the embedded server's values
    # (it asks for a client certificate: mutual TLS), the password in the environment (never in argv).
    epochs_home = folder / "epochs"
    password = json.loads(Path(values["ZK_PASSWORD_FILE"]).read_text())["password"]
    terminal.env.update({name: values[name] for name in ("ZK_HOSTS", "ZK_USER", "ZK_CA", "ZK_CERT", "ZK_KEY")},
                        ZK_PASSWORD=password)
    terminal.run("connection_ensemble")
    assert not (folder / "zookeeper_ensemble.json").exists()
    for conn_id in ("zookeeper_default", "zookeeper_ensemble"):
        got = _airflow(folder, terminal, "connections", "get", conn_id, "-o", "json")
        assert '"conn_type": "zookeeper"' in got.stdout, got.stdout + got.stderr[-2000:]

    terminal.run("dag", timeout=300)
    timings["before_airflow"] = time.monotonic() - started
    log = folder / "terminal-2.log"
    airflow = terminal.background("airflow", log)
    terminal.started = [airflow]  # type: ignore[attr-defined]
    _wait_healthy(ports["AIRFLOW_PORT"], airflow, log)
    timings["airflow_up"] = time.monotonic() - started

    # The reader lists the runs until all three are done (the page says: a minute or two)
    deadline = time.monotonic() + 600
    while True:
        runs = terminal.run("runs", timeout=120)
        states = re.findall(r"\b(success|failed|running|queued)\b", runs)
        if states.count("success") == 3:
            break
        assert "failed" not in states, f"a run failed:\n{runs}\n{_logs(folder)}"
        assert time.monotonic() < deadline, f"runs not done after 10 min:\n{runs}\n{_logs(folder)}"
        time.sleep(5)
    timings["sealed"] = time.monotonic() - started

    status = terminal.run("status", timeout=120)
    assert "pipeline quickstart: frontier 3;" in status, status
    # each epoch sealed, with the rows its run's load_orders returned (100 + the day) in its manifest
    for epoch in (1, 2, 3):
        assert re.search(rf"^\s+{epoch}\s+sealed\s.*\borders\b.*\byes\s+{100 + epoch}$", status, re.M), status
    assert "pipeline quickstart: frontier 3;" in terminal.run("status_ensemble", timeout=120)
    # The later epochs' openings waited for their predecessor's seal in the triggerer, as the DAG says
    # (a deferred task's trigger writes a log of its own beside the task's), connected over TLS.
    trigger_logs = list((folder / "airflow" / "logs").rglob("task_id=epoch.open/*.trigger.*.log"))
    assert any("starting" in log.read_text(errors="replace") for log in trigger_logs), _logs(folder)
    assert "use_ssl: True" in (folder / "triggerer.log").read_text(errors="replace")

    # The login and the Epochs page, as the page says to open them
    passwords = json.loads(terminal.run("login"))
    base = f"http://127.0.0.1:{ports['AIRFLOW_PORT']}"
    assert _http(f"{base}/epochs/api/pipelines")[0] == 401  # no login, no page
    code, body = _http(f"{base}/auth/token", data=json.dumps({"username": "admin",
                                                              "password": passwords["admin"]}).encode())
    assert code == 201, body
    token = json.loads(body)["access_token"]
    code, page = _http(f"{base}/epochs/", token=token)
    assert code == 200 and "Epochs" in page, page[:500]
    code, body = _http(f"{base}/epochs/api/pipelines/quickstart", token=token)
    assert code == 200, body
    assert '"frontier": 3' in body.replace('"frontier":3', '"frontier": 3'), body[:1000]

    # Every port the reader's Airflow opened is on loopback (and so is ZooKeeper's)
    state = json.loads((epochs_home / "zookeeper.json").read_text())
    addresses = _listening(_group(airflow.pid) | {int(state["pid"])})
    assert addresses and all(_loopback(a) for a in addresses), addresses

    # A second local user, while it all runs (issue 48): nothing the quickstart wrote can be read, and no
    # secret is in any process's arguments.
    secrets = {password, passwords["admin"], *_config_secrets(folder / "airflow" / "airflow.cfg")}
    control = folder.parent / "readable-control.txt"  # the check's own control: a 0644 file in the home
    control.write_text("readable by design\n")
    os.chmod(control, 0o644)
    with second_user() as intruder:
        readable = intruder.sh(f"find {shlex.quote(str(folder.parent))} -type f -readable 2>/dev/null; true").stdout
        assert readable.split() == [str(control)], readable[:3000]
        processes = intruder.run(["ps", "-eo", "args"]).stdout
        assert len(processes.splitlines()) > 10 and "airflow" in processes  # it does see our processes
        leaked = [name for name, value in (("zookeeper", password), ("admin", passwords["admin"])) if value in
                  processes] + [f"airflow.cfg secret {value[:4]}..." for value in secrets if value in processes]
        assert not leaked, leaked

    terminal.run("stop", timeout=180)
    airflow.wait(180)
    out = subprocess.run([str(folder / "venv" / "bin" / "airflow-epochs"), "zookeeper", "status"],
                         env={**terminal.env, "AIRFLOW_EPOCHS_HOME": str(epochs_home)}, capture_output=True,
                         text=True, timeout=60)
    assert "not running" in out.stdout
    timings["total"] = time.monotonic() - started
    print("quickstart timings (s from start):", {k: round(v, 1) for k, v in timings.items()})


def _config_secrets(config: Path) -> set[str]:
    """The secrets Airflow wrote into its configuration (Fernet key, API secret, JWT secret), if any."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config)
    return {parser[section][key] for section in parser.sections() for key in ("fernet_key", "secret_key", "jwt_secret")
            if len(parser[section].get(key, "")) >= 8}


def _airflow(folder: Path, terminal: Terminal, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(folder / "venv" / "bin" / "airflow"), *argv],
                          env={**terminal.env, "AIRFLOW_HOME": str(folder / "airflow")}, cwd=folder,
                          capture_output=True, text=True, timeout=120)


def _logs(folder: Path) -> str:
    parts = []
    for name in ("scheduler", "triggerer", "api-server", "dag-processor"):
        path = folder / f"{name}.log"
        if path.exists():
            parts.append(f"--- {name}\n{path.read_text(errors='replace')[-2500:]}")
    for task_log in sorted((folder / "airflow" / "logs").rglob("*.log"))[-3:]:
        parts.append(f"--- {task_log.name}\n{task_log.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


def test_the_first_epoch_dag_in_taskflow_style_seals_the_same_three_epochs(airflow_home, zk_connection, zk):
    """The page's other tab (``docs/examples/quickstart_taskflow.py``), with ``dag.test()``: its three epochs
    sealed in order, the definition taken from its one task, each manifest the rows the function returned."""
    from datetime import datetime, timedelta, timezone

    from airflow.dag_processing.dagbag import DagBag

    from airflow_epochs.coordination import EpochLedger

    shutil.copy(ROOT / "docs" / "examples" / "quickstart_taskflow.py", airflow_home / "dags" / "quickstart_taskflow.py")
    bag = DagBag(dag_folder=str(airflow_home / "dags" / "quickstart_taskflow.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag("quickstart_taskflow")
    assert sorted(t.task_id for t in dag.tasks) == ["epoch.close", "epoch.load_orders", "epoch.open"]
    for n in (1, 2, 3):
        run = dag.test(logical_date=datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=n - 1))
        assert "success" in str(run.state), n
    ledger = EpochLedger(zk, "quickstart_taskflow")
    assert ledger.frontier() == 3
    assert ledger.config_for(1).config.to_json() == {"partitions": {"orders": ["load_orders"]}}
    assert [ledger.seal(n, "orders").manifests["load_orders"]["rows"] for n in (1, 2, 3)] == [101, 102, 103]
