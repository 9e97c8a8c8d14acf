"""The Epochs page on a long pipeline (group ``ui``): how fast its first grid view is served.

A pipeline with 10,000 sealed epochs (and one in flight) is written through the ledger; then a fresh
Epochs app (cold caches, as after an API server start) serves what the page asks for first: the
overview (frontier, leader, counts, barriers) and the newest page of 50 epochs, through FastAPI and
its JSON encoding (Airflow's login is stubbed: the auth manager's check and the DAG lookup are
per-request database reads that do not depend on the pipeline). Peer: the same grid without
paging, i.e. reading every epoch's record, as a page that lists all epochs would.

    python bench/ui_grid.py [--smoke]      # alone; bench/run.py includes it
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial

from common import compare
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.hooks.ledgers import ledger_on
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

PIPELINE = "ui-grid-bench"


def fill(zk: KazooClient, epochs: int) -> EpochLedger:
    ledger = EpochLedger(zk, PIPELINE, owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    for epoch in range(1, epochs + 1):
        ledger.vote(ledger.open_epoch(epoch), "out", "job", {"rows": epoch})
    ledger.open_epoch(epochs + 1)
    return ledger


def first_view_ms(zk: KazooClient) -> tuple[float, float, int]:
    """(first view cold, first view warm median of 5) in ms, and the rows the grid page held."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app
    from airflow_epochs.ui.dags import DagPipelines

    class Index:
        def of(self, dag_ids: object) -> dict[str, DagPipelines]:
            return {"long_dag": DagPipelines("long_dag", frozenset({PIPELINE}), frozenset({"epoch.open"}))}

    app = create_app(ledgers=partial(ledger_on, zk), authorized_dag_ids=lambda user: {"long_dag"},
                     dag_index=Index())  # type: ignore[arg-type]
    app.dependency_overrides[get_user] = lambda: "bench"
    timings = []
    rows = 0
    with TestClient(app) as client:
        for _ in range(6):
            started = time.perf_counter()
            overview = client.get(f"/api/pipelines/{PIPELINE}")
            page = client.get(f"/api/pipelines/{PIPELINE}/epochs", params={"limit": 50})
            timings.append((time.perf_counter() - started) * 1000)
            assert overview.status_code == 200 and page.status_code == 200, (overview.text, page.text)
            rows = len(page.json()["rows"])
            time.sleep(0.2)
    return timings[0], statistics.median(timings[1:]), rows


def read_every_epoch_ms(ledger: EpochLedger, epochs: int) -> float:
    started = time.perf_counter()
    for epoch in range(epochs + 1, 0, -1):
        ledger.epoch_info(epoch)
    return (time.perf_counter() - started) * 1000


def run_all(hosts: str, smoke: bool) -> None:
    epochs = 300 if smoke else 10_000
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=30)
    try:
        started = time.perf_counter()
        ledger = fill(zk, epochs)
        print(f"  {epochs:,} epochs written in {time.perf_counter() - started:.1f} s", flush=True)
        cold, warm, rows = first_view_ms(zk)
        peer = read_every_epoch_ms(ledger, epochs)
    finally:
        zk.stop()
        zk.close()
    size = f"{epochs:,} epochs" + (" (smoke)" if smoke else "")
    compare("ui_grid_10k_ms", "ui", "Epochs page: first grid view of a 10,000-epoch pipeline", [cold], [peer], "ms",
            "read every epoch (no paging)",
            note=f"{size}: overview + newest {rows} epochs over HTTP, cold app; warm (polling) {warm:.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="300 epochs instead of 10,000")
    args = parser.parse_args()

    with EmbeddedZooKeeper() as server:
        run_all(server.hosts, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
