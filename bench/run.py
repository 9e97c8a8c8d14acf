"""Coordination benchmarks: each of our costs beside the peer a user would otherwise pick, same run.

    python bench/run.py            # full sizes (several minutes; the 60 s poke peer dominates)
    python bench/run.py --smoke    # tiny sizes, to keep the code working (CI)

Prints one table (ours, peer, ratio) and writes it as JSON. Every number comes from this run. The
measures are numbered as in the benchmark issue: 1 wake latency, 2 seal -> downstream task under a
real scheduler (scheduler_latency.py), 3 ZooKeeper cost per epoch, 4 barrier, 5 many waiters
(many_waiters.py), 6 and 8 Spark (spark_epochs.py), 7 sealing vs ordering.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.barriers import Barrier, StragglerPolicy
from airflow_epochs.embedded_zookeeper import EmbeddedZooKeeper, four_letter_word

ROWS: list[dict[str, Any]] = []


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(measure: str, ours: float | None, peer: float | None, unit: str, peer_name: str, note: str = "") -> None:
    ratio = (peer / ours) if ours and peer else None
    ROWS.append({"measure": measure, "ours": ours, "peer": peer, "unit": unit, "peer_name": peer_name,
                 "peer_over_ours": ratio, "note": note})
    print(f"  {measure}: ours {fmt(ours)} {unit}, {peer_name} {fmt(peer)} {unit}"
          + (f" ({ratio:.1f}x)" if ratio else ""), flush=True)


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def packets(port: int) -> int:
    for line in four_letter_word(port, "mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[-1])
    raise RuntimeError("mntr did not report zk_packets_received")


def client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=30)
    return zk


# -- 1. wake latency -------------------------------------------------------------------------------

def wake_latency(hosts: str, samples: int, poke_plan: list[tuple[float, int]]) -> None:
    os.environ["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"] = json.dumps({"conn_type": "zookeeper", "host": hosts})
    from airflow_epochs.triggers.seals import PartitionsSealedTrigger

    zk = client(hosts)
    ledger = EpochLedger(zk, "wake", owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))

    async def one(epoch: int) -> float:
        trigger = PartitionsSealedTrigger(pipeline="wake", epoch=epoch, partitions=["out"])
        events = trigger.run()
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.05)
        attempt = await asyncio.to_thread(ledger.open_epoch, epoch)
        await asyncio.to_thread(ledger.vote, attempt, "out", "job")
        sealed = time.perf_counter()
        await waiting
        woke = time.perf_counter()
        await events.aclose()
        return woke - sealed

    async def all_samples() -> list[float]:
        return [await one(epoch) for epoch in range(1, samples + 1)]

    ours = asyncio.run(all_samples())
    p50, p95 = pct(ours, 0.5), pct(ours, 0.95)
    next_epoch = samples + 1
    for interval, count in poke_plan:
        latencies = []
        for _ in range(count):
            latencies.append(poke_once(ledger, next_epoch, interval))
            next_epoch += 1
        row(f"wake after seal, p50 (poke every {interval:g} s)", p50 * 1000, statistics.median(latencies) * 1000,
            "ms", f"poke-mode sensor, poke_interval={interval:g}s", f"{samples} samples ours, {count} peer")
    row("wake after seal, p95 (ours)", p95 * 1000, None, "ms", "-", f"{samples} samples")
    zk.stop()


def poke_once(ledger: EpochLedger, epoch: int, interval: float) -> float:
    """A poke-mode sensor: check, sleep ``interval``, repeat; the seal lands at a random phase."""
    sealed_at: list[float] = []

    def seal() -> None:
        time.sleep(random.uniform(0, interval))  # a random phase, as a real seal has
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "out", "job")
        sealed_at.append(time.perf_counter())

    sealer = threading.Thread(target=seal)
    sealer.start()
    while ledger.seal(epoch, "out") is None:
        time.sleep(interval)
    seen = time.perf_counter()
    sealer.join()
    return seen - sealed_at[0]


# -- 3. ZooKeeper cost per epoch -----------------------------------------------------------------

def cost_per_epoch(hosts: str, port: int, producers: int, epochs: int) -> None:
    zk = client(hosts)
    ledger = EpochLedger(zk, f"cost{producers}", owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": tuple(f"p{i}" for i in range(producers))}))
    stats0 = dict(ledger.session.stats)
    before = packets(port)
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        attempt = ledger.open_epoch(epoch)
        for i in range(producers):
            ledger.vote(attempt, "out", f"p{i}", {"rows": i})
    took = (time.perf_counter() - started) / epochs
    requests = (packets(port) - before) / epochs
    writes = (ledger.session.stats["writes"] - stats0["writes"]) / epochs
    reads = (ledger.session.stats["reads"] - stats0["reads"]) / epochs
    row(f"ZooKeeper requests per epoch ({producers} producers)", requests, None, "requests", "-",
        f"{writes:.0f} znode writes, {reads:.0f} reads per epoch; {writes / producers:.1f} writes per producer")
    row(f"coordination time per epoch ({producers} producers)", took * 1000, None, "ms", "-",
        "share of a 1 s warm Spark Connect epoch: " + f"{took * 100:.1f} %")
    zk.stop()


# -- 4. barrier release --------------------------------------------------------------------------

def barrier_release(hosts: str, port: int, n: int) -> None:
    clients = [client(hosts) for _ in range(8)]
    ledger = EpochLedger(clients[0], f"bar{n}", owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    ledger.open_epoch(1)
    names = [f"w{i}" for i in range(n)]
    Barrier(clients[0], f"bar{n}", 1, "b").declare(StragglerPolicy.fail(600), names)

    def ours(i: int, started: list[float], passed: list[float]) -> None:
        barrier = Barrier(clients[i % 8], f"bar{n}", 1, "b")
        started.append(time.perf_counter())
        barrier.arrive(names[i])
        barrier.wait(timeout=300)
        passed.append(time.perf_counter())

    def theirs(i: int, started: list[float], passed: list[float]) -> None:
        barrier = clients[i % 8].DoubleBarrier(f"/bench/double{n}", n, identifier=names[i])
        started.append(time.perf_counter())
        barrier.enter()
        passed.append(time.perf_counter())

    results = {}
    for label, fn in (("ours", ours), ("kazoo DoubleBarrier", theirs)):
        started: list[float] = []
        passed: list[float] = []
        before = packets(port)
        threads = [threading.Thread(target=fn, args=(i, started, passed)) for i in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        last = max(started)
        release = [p - last for p in passed]
        results[label] = (pct(release, 0.5), pct(release, 0.95), (packets(port) - before) / n)
    o, t = results["ours"], results["kazoo DoubleBarrier"]
    row(f"barrier release p50, N={n}", o[0] * 1000, t[0] * 1000, "ms", "kazoo DoubleBarrier")
    row(f"barrier release p95, N={n}", o[1] * 1000, t[1] * 1000, "ms", "kazoo DoubleBarrier")
    row(f"ZooKeeper requests per participant, N={n}", o[2], t[2], "requests", "kazoo DoubleBarrier")
    for zk in clients:
        zk.stop()


# -- 7. sealing vs ordering ----------------------------------------------------------------------

def sealing_vs_ordering(hosts: str, producers: int, epochs: int) -> None:
    clients = [client(hosts) for _ in range(min(producers, 8))]
    config = PipelineConfig({f"part{i}": (f"p{i}",) for i in range(producers)})

    def run(vote: Callable[[int, int, Any], None], opener: Callable[[int], Any]) -> float:
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            attempt = opener(epoch)
            threads = [threading.Thread(target=vote, args=(epoch, i, attempt)) for i in range(producers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return epochs / (time.perf_counter() - started)

    ledgers = [EpochLedger(zk, f"seal{producers}", owner="bench") for zk in clients]
    ledgers[0].create_pipeline(config)
    ours = run(lambda epoch, i, attempt: ledgers[i % len(ledgers)].vote(attempt, f"part{i}", f"p{i}", {"r": i}),
               lambda epoch: ledgers[0].open_epoch(epoch))

    base = f"/bench/ordered{producers}"
    clients[0].ensure_path(f"{base}/votes")
    clients[0].ensure_path(f"{base}/frontier")
    locks = [zk.Lock(f"{base}/lock") for zk in clients]

    def ordered_vote(epoch: int, i: int, _attempt: Any) -> None:
        zk = clients[i % len(clients)]
        with locks[i % len(locks)]:  # total order: every vote of every epoch under one global lock
            zk.create(f"{base}/votes/{epoch}-{i}", b"{}")
            if len(zk.get_children(f"{base}/votes")) == producers * epoch:
                zk.set(f"{base}/frontier", str(epoch).encode())

    peer = run(ordered_vote, lambda epoch: None)
    row(f"epochs sealed per second, {producers} producers", ours, peer, "epochs/s",
        "votes under one global ZooKeeper lock", "higher is better: ratio < 1 means sealing is faster")
    for zk in clients:
        zk.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results.json"))
    args = parser.parse_args()
    smoke = args.smoke
    import logging

    for noisy in ("kazoo", "airflow_epochs.kazoo", "airflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import kazoo
    import pyspark

    machine = {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
               "kazoo": kazoo.__version__ if hasattr(kazoo, "__version__") else "?",
               "pyspark": pyspark.__version__, "mode": "smoke" if smoke else "full"}
    print(f"machine: {machine}", flush=True)
    # No per-address connection limit: the many-waiters peer opens one session per waiter.
    with EmbeddedZooKeeper(max_client_connections=0) as server:
        print("1. wake latency", flush=True)
        wake_latency(server.hosts, 5 if smoke else 50, [(5.0, 1)] if smoke else [(60.0, 3), (5.0, 5)])
        print("3. ZooKeeper cost per epoch", flush=True)
        for producers in ((2,) if smoke else (1, 8)):
            cost_per_epoch(server.hosts, server.port, producers, 3 if smoke else 30)
        print("4. barrier", flush=True)
        for n in ((10,) if smoke else (10, 100, 1000)):
            barrier_release(server.hosts, server.port, n)
        print("7. sealing vs ordering", flush=True)
        for producers in ((1, 4) if smoke else (1, 2, 4, 8, 16, 32, 64)):
            sealing_vs_ordering(server.hosts, producers, 2 if smoke else 10)
        print("5. many waiters", flush=True)
        from many_waiters import run_all as many_waiters  # bench/ is this script's folder
        from spark_epochs import run_all as spark_benchmarks

        many_waiters(server.hosts, server.port, smoke, row)

        spark_benchmarks(server.hosts, smoke, row)
        print("2. seal -> downstream task under a real scheduler", flush=True)
        from scheduler_latency import measure as scheduler_latency

        scheduler_latency(server.hosts, 1 if smoke else 3, smoke, row)
    print()
    print(f"{'measure':<58} {'ours':>10} {'peer':>10} {'peer/ours':>9}  unit / peer")
    for item in ROWS:
        ratio = item.get("peer_over_ours")
        print(f"{item['measure']:<58} {fmt(item.get('ours')):>10} {fmt(item.get('peer')):>10} "
              f"{(f'{ratio:.2f}' if ratio else '-'):>9}  {item.get('unit', '')} / {item.get('peer_name', '')} "
              f"{item.get('note', '')}")
    Path(args.out).write_text(json.dumps({"machine": machine, "rows": ROWS}, indent=2))
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
