"""A publishing process: the crash tests kill it with SIGKILL at a named step; the race tests start
several at once on the same tables.

Usage:
  python publish_worker.py HOSTS PIPELINE TABLE PARTITION EPOCH KILL_AT
  python publish_worker.py race HOSTS PIPELINE PARTITION GO_DIR WORKER
(catalog settings as JSON on stdin, the secret included: never on the command line). In race mode stdin
is one line ``{"catalog": {...}, "races": [{"table": ..., "through": [2, 4, 6]}, ...]}``: for each race the
worker writes ``GO_DIR/<table>.ready-<WORKER>``, waits for ``GO_DIR/<table>.go`` (the test creates it
once every publisher of the race is ready), publishes through each epoch in turn and prints one JSON
line (its outcomes, or the error it met).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from zk_test_server import connect

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.tables import CatalogSettings, load_catalog, publish_sealed


def _catalog(raw: dict[str, Any]) -> Any:
    return load_catalog(CatalogSettings(raw["name"], raw["kind"], raw["properties"], raw["secret"]))


def race(hosts: str, pipeline: str, partition: str, go_dir: str, worker: str) -> None:
    plan = json.loads(sys.stdin.readline())  # one line: the test keeps the pipe open until it collects
    catalog = _catalog(plan["catalog"])
    zk = connect(hosts, start=False)
    zk.start(timeout=15)
    ledger = EpochLedger(zk, pipeline, owner=f"publisher-{worker}")
    catalog.list_namespaces()  # connect now, not inside the race
    for item in plan["races"]:
        table = item["table"]
        Path(go_dir, f"{table}.ready-{worker}").touch()
        go = Path(go_dir, f"{table}.go")
        deadline = time.monotonic() + 120
        while not go.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"no go for {table}")
            time.sleep(0.002)
        result: dict[str, Any] = {"table": table, "worker": worker, "published": [], "already": []}
        try:
            for epoch in item["through"]:
                outcome = publish_sealed(ledger, catalog, table, partition, epoch)
                result["published"] += [r.epoch for r in outcome.published]
                result["already"] += [r.epoch for r in outcome.already]
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
            result["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(result), flush=True)
    zk.stop()
    zk.close()


def main() -> None:
    if sys.argv[1] == "race":
        race(*sys.argv[2:7])
        return
    hosts, pipeline, table, partition, epoch, kill_at = sys.argv[1:7]
    raw = json.loads(sys.stdin.read())

    def on_step(step: str) -> None:
        print(f"step {step}", flush=True)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    zk = connect(hosts, start=False)
    zk.start(timeout=15)
    outcome = publish_sealed(EpochLedger(zk, pipeline), _catalog(raw), table, partition, int(epoch),
                             on_step=on_step)
    print(json.dumps(outcome.to_dict()), flush=True)
    zk.stop()


if __name__ == "__main__":
    main()
