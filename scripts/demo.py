"""Run the demo pipeline for real: embedded ZooKeeper, a local Airflow home, one DAG run per epoch.

Everything it starts lives under ``.epochs/demo`` (ZooKeeper data, AIRFLOW_HOME); a rerun resumes
after the last sealed epoch, ``--clean`` starts over.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "example_epoch_pipeline"
PIPELINE = "flights_daily"


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3, help="seal epochs 1..N (default 3)")
    parser.add_argument("--clean", action="store_true", help="forget earlier runs and start from epoch 1")
    parser.add_argument("--state-dir", default=str(ROOT / ".epochs" / "demo"), help="where the demo keeps its state")
    args = parser.parse_args()
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, not {args.epochs}")

    base = Path(args.state_dir).resolve()
    if args.clean and base.exists():
        say(f"--clean: removing {base}")
        shutil.rmtree(base)
    base.mkdir(parents=True, exist_ok=True)
    airflow_home = base / "airflow"
    airflow_home.mkdir(exist_ok=True)

    from airflow_epochs.embedded_zookeeper import EmbeddedZooKeeper

    port_file = base / "zookeeper.port"
    port = int(port_file.read_text()) if port_file.exists() else None
    say("starting an embedded ZooKeeper server (local java + the ZooKeeper jars of the pyspark wheel)")
    zk = EmbeddedZooKeeper(directory=base / "zookeeper", port=port)
    started = time.monotonic()
    zk.start()
    port_file.write_text(str(zk.port))
    say(f"ZooKeeper serving at {zk.hosts} after {time.monotonic() - started:.1f} s")

    # Airflow reads its configuration on first import: set it up before that.
    os.environ.update({
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": zk.hosts}),
        "AIRFLOW_EPOCHS_DEPLOYMENT": "demo",
    })
    try:
        return run(args.epochs, airflow_home, zk.hosts)
    finally:
        zk.stop()
        say("ZooKeeper stopped (its data stays in the state folder, so a rerun resumes)")


def run(epochs: int, airflow_home: Path, hosts: str) -> int:
    from kazoo.client import KazooClient

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
    dag = bag.get_dag(DAG_ID)
    if dag is None:
        say(f"DAG {DAG_ID} not found in dags/")
        return 1

    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    try:
        ledger = EpochLedger(client, PIPELINE, owner="demo")
        try:
            frontier = ledger.frontier()
        except PipelineNotFound:
            frontier = 0
        if frontier:
            say(f"resuming: epochs 1..{frontier} are already sealed in ZooKeeper, skipping them")
        timings: dict[int, float] = {}
        for epoch in range(frontier + 1, epochs + 1):
            day = datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=epoch - 1)
            say(f"epoch {epoch} ({day:%Y-%m-%d}): DAG run {DAG_ID}: open -> ingest flights, ingest weather "
                "-> barrier -> join -> close")
            started = time.monotonic()
            run = dag.test(logical_date=day, run_conf={"max_delay": 0.2})
            timings[epoch] = time.monotonic() - started
            state = str(getattr(run, "state", "unknown"))
            if "success" not in state:
                say(f"epoch {epoch}: DAG run ended {state}; stopping")
                return 1
            say(f"epoch {epoch}: sealed in {timings[epoch]:.1f} s; frontier now {ledger.frontier()}")
        if frontier >= epochs:
            say(f"nothing to do: epochs 1..{epochs} are sealed (use --epochs {epochs + 1} or --clean)")
        print_table(ledger, epochs, timings)
    finally:
        client.stop()
        client.close()
    return 0


def print_table(ledger: object, epochs: int, timings: dict[int, float]) -> None:
    from airflow_epochs.coordination import EpochLedger

    assert isinstance(ledger, EpochLedger)
    print()
    print(f"pipeline {PIPELINE!r}: frontier {ledger.frontier()}")
    header = (f"{'epoch':>5}  {'state':<8} {'attempt':>7}  {'owner':<8} {'partition':<9} {'rows':>6}  "
              f"{'seal zxid':>10}  {'run s':>6}")
    print(header)
    print("-" * len(header))
    for epoch in range(1, epochs + 1):
        info = ledger.epoch_info(epoch)
        if info is None:
            continue
        for partition in info.partitions:
            seal = ledger.seal(epoch, partition)
            rows = ",".join(str(m.get("rows", "-")) for m in seal.manifests.values()) if seal else "-"
            zxid = f"{seal.zxid:x}" if seal else "-"
            took = f"{timings[epoch]:.1f}" if epoch in timings else "earlier"
            print(f"{epoch:>5}  {info.state:<8} {info.attempt:>7}  {info.owner:<8} {partition:<9} {rows:>6}  "
                  f"{zxid:>10}  {took:>6}")
    print()
    barriers = [e for e in ledger.history() if e.event == "barrier_released"]
    for event in barriers[-epochs:]:
        print(f"barrier {event.detail['barrier']!r} of epoch {event.detail['epoch']}: released "
              f"({event.detail['decision']}, {event.detail['arrived']} arrived, "
              f"late: {event.detail['late'] or 'none'})")
    print()
    print("history of the last epoch (commit order, zxid):")
    last = [e for e in ledger.history() if e.detail.get("epoch") == ledger.frontier()]
    for event in last:
        detail = ", ".join(f"{k}={v}" for k, v in sorted(event.detail.items()) if k not in ("config", "epoch"))
        print(f"  {event.zxid:>6x}  {event.event:<17} {detail}")


if __name__ == "__main__":
    sys.exit(main())
