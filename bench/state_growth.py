"""What the ledger's state costs, and that it stays bounded (groups ``open``, ``growth``, ``capacity``).

- ``open``: ZooKeeper requests to open a new epoch (the happy path: one read, one transaction).
- ``growth``: requests for the last sealed snapshot at epoch 2,000 over those at epoch 10 (the
  snapshot was sealed at epoch 1, so a walk back would read 2,000 epochs), and the pipeline's znodes
  after 2,000 epochs over those after 200, with ``retain_epochs=100`` applied by the coordinator.
- ``capacity``: znodes, bytes and requests per epoch at a few shapes (partitions x producers),
  fitted as ``a + b*P + c*P*N`` and extrapolated to 10,000 pipelines x 100 partitions x 10
  producers, beside ZooKeeper's published limits.
"""

from __future__ import annotations

import datetime
import statistics
import time
from typing import Any

from common import client, count_znodes, figure
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig, open_as_leader

# ZooKeeper's published figures (its documentation's benchmarks): about 21,000 writes/s on a 3-server
# ensemble (100% writes, 1 KB); every request and znode under 1 MB (jute.maxbuffer).
ZK_WRITES_PER_S = 21_000
ZK_MAX_REQUEST_BYTES = 1024 * 1024


def _requests(ledger: EpochLedger) -> int:
    stats = ledger.session.stats
    return stats["reads"] + stats["transactions"] + stats["failed_transactions"]


def seal_epoch(ledger: EpochLedger, epoch: int, partitions: int, producers: int, snapshot: Any = None) -> None:
    attempt = ledger.open_epoch(epoch)
    for p in range(partitions):
        for q in range(producers):
            last = q == producers - 1
            ledger.vote(attempt, f"part{p}", f"prod{q}", {"rows": q}, snapshot=snapshot if last else None)


def epoch_cost(hosts: str, sizes: tuple[int, ...], epochs: int) -> None:
    """Requests and time of whole epochs (open, every producer's vote, the seals) on one client."""
    zk = client(hosts)
    for producers in sizes:
        ledger = EpochLedger(zk, f"cost{producers}", owner="bench")
        ledger.create_pipeline(PipelineConfig({"part0": tuple(f"prod{i}" for i in range(producers))}))
        seal_epoch(ledger, 1, 1, producers)  # warm: the configuration is read once
        before = _requests(ledger)
        writes = ledger.session.stats["writes"]
        started = time.perf_counter()
        for epoch in range(2, epochs + 2):
            seal_epoch(ledger, epoch, 1, producers)
        took = (time.perf_counter() - started) / epochs
        per_epoch = (_requests(ledger) - before) / epochs
        figure(f"cost_requests_p{producers}", "cost", f"ZooKeeper requests per epoch, {producers} producers",
               per_epoch, "requests",
               f"{(ledger.session.stats['writes'] - writes) / epochs:.0f} znode writes per epoch")
        figure(f"cost_ms_p{producers}", "cost", f"coordination time per epoch, {producers} producers", took * 1000,
               "ms", f"sequential on one client; {took * 100:.1f} % of a 1 s warm Spark Connect epoch")
    zk.stop()


def open_cost(hosts: str, samples: int) -> None:
    zk = client(hosts)
    ledger = EpochLedger(zk, "open-cost", owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    counts: list[int] = []
    took: list[float] = []
    for epoch in range(1, samples + 1):
        before = _requests(ledger)
        started = time.perf_counter()
        attempt = ledger.open_epoch(epoch)
        took.append((time.perf_counter() - started) * 1000)
        counts.append(_requests(ledger) - before)
        ledger.vote(attempt, "out", "job")
    steady = counts[1:]  # the first opening also reads the configuration once
    figure("open_requests", "open", "ZooKeeper requests to open a new epoch", max(steady), "requests",
           f"max over {len(steady)} openings (the first, {counts[0]}, also reads the configuration once)")
    figure("open_ms", "open", "time to open a new epoch, median", statistics.median(took), "ms",
           f"{samples} openings on loopback")
    zk.stop()


def growth(hosts: str, epochs: int, early: int, retain: int) -> None:
    zk = client(hosts)
    name = "growth"
    ledger = EpochLedger(zk, name, owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",), "side": ("job",)}, retain_epochs=retain))
    lease = datetime.timedelta(minutes=10)
    marks: dict[int, dict[str, float]] = {}
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        decision = open_as_leader(ledger, epoch, lease_duration=lease)  # opens, and applies retention
        assert decision.attempt is not None
        ledger.vote(decision.attempt, "out", "job", {"e": epoch}, snapshot="s3://state/1" if epoch == 1 else None)
        ledger.vote(decision.attempt, "side", "job", {"e": epoch})
        if epoch in (10, early, epochs):
            before = _requests(ledger)
            ref = ledger.last_sealed_snapshot("out", before_epoch=epoch + 1)
            snapshot_requests = _requests(ledger) - before
            assert ref is not None and ref.epoch == 1
            nodes, size = count_znodes(zk, ledger.paths.base)
            marks[epoch] = {"snapshot_requests": snapshot_requests, "znodes": nodes, "bytes": size}
    took = time.perf_counter() - started
    figure("growth_snapshot_requests", "growth",
           f"requests for the last sealed snapshot at epoch {epochs} over at epoch 10",
           marks[epochs]["snapshot_requests"] / marks[10]["snapshot_requests"], "ratio",
           f"{marks[10]['snapshot_requests']:.0f} vs {marks[epochs]['snapshot_requests']:.0f} requests; the "
           f"snapshot was sealed at epoch 1 (a walk back would read every epoch)")
    figure("growth_znodes", "growth",
           f"znodes after {epochs} epochs over after {early} (retain_epochs={retain})",
           marks[epochs]["znodes"] / marks[early]["znodes"], "ratio",
           f"{marks[early]['znodes']:.0f} -> {marks[epochs]['znodes']:.0f} znodes, "
           f"{marks[early]['bytes'] / 1024:.0f} -> {marks[epochs]['bytes'] / 1024:.0f} KB; "
           f"{epochs} epochs driven through open_as_leader in {took:.0f} s")
    zk.stop()


def _per_epoch(zk: KazooClient, name: str, partitions: int, producers: int, epochs: int) -> dict[str, float]:
    ledger = EpochLedger(zk, name, owner="bench")
    config = PipelineConfig({f"part{p}": tuple(f"prod{q}" for q in range(producers)) for p in range(partitions)},
                            retain_epochs=None)
    ledger.create_pipeline(config)
    seal_epoch(ledger, 1, partitions, producers)  # warm: configuration cached
    nodes0, bytes0 = count_znodes(zk, ledger.paths.base)
    stats0 = dict(ledger.session.stats)
    for epoch in range(2, epochs + 2):
        seal_epoch(ledger, epoch, partitions, producers, snapshot="s3://state")
    nodes1, bytes1 = count_znodes(zk, ledger.paths.base)
    stats = {k: ledger.session.stats[k] - stats0[k] for k in stats0}
    return {"znodes": (nodes1 - nodes0) / epochs, "bytes": (bytes1 - bytes0) / epochs,
            "requests": (stats["reads"] + stats["transactions"] + stats["failed_transactions"]) / epochs,
            "writes": stats["writes"] / epochs, "transactions": stats["transactions"] / epochs}


def fit_shapes(points: dict[tuple[int, int], float]) -> tuple[float, float, float]:
    """Least squares for value = a + b*P + c*P*N (numpy-free: 3x3 normal equations)."""
    rows = [(1.0, float(p), float(p * n), v) for (p, n), v in points.items()]
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    y = [sum(r[i] * r[3] for r in rows) for i in range(3)]
    for col in range(3):  # Gauss-Jordan
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        y[col], y[pivot] = y[pivot], y[col]
        for r in range(3):
            if r != col and m[col][col]:
                f = m[r][col] / m[col][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col], strict=True)]
                y[r] -= f * y[col]
    return y[0] / m[0][0], y[1] / m[1][1], y[2] / m[2][2]


def capacity(hosts: str, shapes: tuple[tuple[int, int], ...], epochs: int, *,
             pipelines: int = 10_000, partitions: int = 100, producers: int = 10,
             epoch_seconds: float = 3600.0) -> None:
    zk = client(hosts)
    measured: dict[tuple[int, int], dict[str, float]] = {}
    for p, n in shapes:
        measured[(p, n)] = _per_epoch(zk, f"capacity-{p}x{n}", p, n, epochs)
        m = measured[(p, n)]
        figure(f"capacity_znodes_per_epoch_{p}x{n}", "capacity",
               f"znodes kept per epoch, {p} partitions x {n} producers", m["znodes"], "znodes",
               f"{m['bytes']:.0f} bytes, {m['requests']:.1f} requests, {m['writes']:.1f} writes "
               f"in {m['transactions']:.1f} transactions per epoch", **m)
    zk.stop()
    est: dict[str, float] = {}
    for key in ("znodes", "bytes", "writes", "transactions", "requests"):
        a, b, c = fit_shapes({shape: m[key] for shape, m in measured.items()})
        est[key] = a + b * partitions + c * partitions * producers
    # ZooKeeper's rate limit is on transactions (one multi-op is one write request to the leader)
    tx_per_s = pipelines * est["transactions"] / epoch_seconds
    shape = f"{pipelines:,} pipelines x {partitions} partitions x {producers} producers"
    figure("capacity_10k_tx_per_s", "capacity", f"write transactions per second, {shape}, hourly epochs",
           tx_per_s, "tx/s", f"ZooKeeper's published limit: about {ZK_WRITES_PER_S:,} writes/s on 3 servers "
           f"({tx_per_s / ZK_WRITES_PER_S:.1%} of it); {est['transactions']:.0f} transactions and "
           f"{est['writes']:.0f} znode writes per epoch per pipeline", limit=ZK_WRITES_PER_S)
    # The planning figure: what each epoch kept in full costs across the whole fleet.
    figure("capacity_10k_gb_per_kept_epoch", "capacity", f"data per epoch kept in full, {shape}",
           pipelines * est["bytes"] / 1e9, "GB", f"{pipelines * est['znodes']:,.0f} znodes; "
           f"retain_epochs=K keeps K times this")
