"""5. Many waiters: N deferred sealed-partition sensors in one triggerer-like event loop.

Ours: N ``PartitionsSealedTrigger`` instances (the triggers our deferrable sensors hand to Airflow's
triggerer) in one asyncio loop, sharing one kazoo session. Peer: the same waits with one kazoo
client per waiter (what a trigger that opens its own client costs). Each waiter waits for its own
partition of one epoch; the partitions are then sealed one by one. Measured: ZooKeeper sessions,
resident memory added, and seal -> wake latency (p50, p95, and until the last waiter woke), timed
from the start of each sealing vote.

    python bench/many_waiters.py [--smoke]      # alone; bench/run.py includes it
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig, PipelinePaths
from airflow_epochs.embedded_zookeeper import EmbeddedZooKeeper, four_letter_word

Row = Callable[..., None]


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _sessions(port: int) -> int:
    for line in four_letter_word(port, "mntr").splitlines():
        if line.startswith("zk_num_alive_connections"):
            return int(line.split()[-1])
    raise RuntimeError("mntr did not report zk_num_alive_connections")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


PER_PIPELINE = 200  # partitions per pipeline (an epoch holds at most 256)


def _where(name: str, i: int) -> tuple[str, str]:
    """Waiter i waits for this pipeline's partition."""
    return f"{name}-{i // PER_PIPELINE}", f"p{i % PER_PIPELINE}"


def _pipelines(zk: KazooClient, name: str, n: int) -> dict[str, tuple[EpochLedger, Any]]:
    opened = {}
    for start in range(0, n, PER_PIPELINE):
        pipeline = _where(name, start)[0]
        ledger = EpochLedger(zk, pipeline, owner="bench")
        ledger.create_pipeline(PipelineConfig({f"p{i}": ("job",) for i in range(min(PER_PIPELINE, n - start))}))
        opened[pipeline] = (ledger, ledger.open_epoch(1))
    return opened


async def _seal_all(name: str, opened: dict[str, tuple[EpochLedger, Any]], n: int,
                    sealed_at: dict[int, float]) -> None:
    for i in range(n):
        pipeline, partition = _where(name, i)
        ledger, attempt = opened[pipeline]
        # Timed from the start of the sealing vote (the commit lands inside the call), so a latency
        # includes the vote's own round trip, for ours and the peer alike.
        sealed_at[i] = time.perf_counter()
        await asyncio.to_thread(ledger.vote, attempt, partition, "job")


async def ours(hosts: str, port: int, zk: KazooClient, n: int) -> dict[str, float]:
    from airflow_epochs.triggers.seals import PartitionsSealedTrigger

    os.environ["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"] = json.dumps({"conn_type": "zookeeper", "host": hosts})
    opened = _pipelines(zk, "waiters-ours", n)
    base_sessions, base_rss = _sessions(port), _rss_mb()
    woke: dict[int, float] = {}

    async def wait(i: int) -> None:
        pipeline, partition = _where("waiters-ours", i)
        trigger = PartitionsSealedTrigger(pipeline=pipeline, epoch=1, partitions=[partition])
        async for _event in trigger.run():
            woke[i] = time.perf_counter()
            break

    tasks = [asyncio.ensure_future(wait(i)) for i in range(n)]
    await asyncio.sleep(1.0 + n / 500)  # every waiter has read the state and set its watch
    sessions, rss = _sessions(port) - base_sessions, _rss_mb() - base_rss
    sealed_at: dict[int, float] = {}
    await _seal_all("waiters-ours", opened, n, sealed_at)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    return _summary(sealed_at, woke, sessions, rss)


async def peer(hosts: str, port: int, zk: KazooClient, n: int) -> dict[str, float]:
    opened = _pipelines(zk, "waiters-peer", n)
    base_sessions, base_rss = _sessions(port), _rss_mb()
    loop = asyncio.get_running_loop()
    woke: dict[int, float] = {}
    clients: list[KazooClient] = []

    async def wait(i: int) -> None:
        client = KazooClient(hosts=hosts, timeout=30)
        await asyncio.to_thread(client.start, 30)
        clients.append(client)
        done = asyncio.Event()
        pipeline, partition = _where("waiters-peer", i)
        path = PipelinePaths(pipeline).seal(1, opened[pipeline][1].generation, partition)

        def created(_event: Any) -> None:  # a watch on a missing node fires once: when it is created
            loop.call_soon_threadsafe(done.set)

        if await asyncio.to_thread(client.exists, path, created) is not None:
            done.set()
        await done.wait()
        woke[i] = time.perf_counter()

    tasks = [asyncio.ensure_future(wait(i)) for i in range(n)]
    await asyncio.sleep(1.0 + n / 100)
    sessions, rss = _sessions(port) - base_sessions, _rss_mb() - base_rss
    sealed_at: dict[int, float] = {}
    await _seal_all("waiters-peer", opened, n, sealed_at)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
    for client in clients:
        client.stop()
        client.close()
    return _summary(sealed_at, woke, sessions, rss)


def _summary(sealed_at: dict[int, float], woke: dict[int, float], sessions: int, rss: float) -> dict[str, float]:
    latencies = [woke[i] - sealed_at[i] for i in sealed_at]
    return {"sessions": sessions, "rss_mb": rss, "p50_ms": 1000 * _pct(latencies, 0.5),
            "p95_ms": 1000 * _pct(latencies, 0.95), "all_woke_s": max(woke.values()) - min(sealed_at.values())}


def run_all(hosts: str, port: int, smoke: bool, row: Row) -> None:
    n = 50 if smoke else 1000
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=30)
    try:
        gc.collect()
        mine = asyncio.run(ours(hosts, port, zk, n))
        gc.collect()
        theirs = asyncio.run(peer(hosts, port, zk, n))
    finally:
        zk.stop()
        zk.close()
    name = "one kazoo client per waiter"
    row(f"5. {n} waiters in one loop: ZooKeeper sessions", mine["sessions"], theirs["sessions"], "sessions", name)
    row(f"5. {n} waiters: memory added", max(mine["rss_mb"], 0.1), theirs["rss_mb"], "MB", name)
    row(f"5. {n} waiters: seal -> wake p50", mine["p50_ms"], theirs["p50_ms"], "ms", name,
        f"p95 ours {mine['p95_ms']:.1f} ms, peer {theirs['p95_ms']:.1f} ms")
    row(f"5. {n} waiters: first seal -> last wake", mine["all_woke_s"], theirs["all_woke_s"], "s", name,
        f"{n} seals written one after another")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="50 waiters instead of 1,000")
    args = parser.parse_args()

    def row(measure: str, ours: float, peer: float, unit: str, peer_name: str, note: str = "") -> None:
        print(f"  {measure}: ours {ours:.3g} {unit}, {peer_name} {peer:.3g} {unit}; {note}", flush=True)

    with EmbeddedZooKeeper(max_client_connections=0) as server:
        run_all(server.hosts, server.port, args.smoke, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
