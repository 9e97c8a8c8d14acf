"""Many waiters (group ``waiters``): N deferred sealed-partition sensors in one triggerer-like loop.

Ours: N ``PartitionsSealedTrigger`` instances (the triggers our deferrable sensors hand to Airflow's
triggerer) in one asyncio loop, sharing one kazoo session. Peer: the same waits with one kazoo client
per waiter, each an exists-watch on its seal (what a trigger opening its own client costs). Each
waiter waits for its own partition of one epoch; the partitions are then sealed one after another.

Fair by construction: the clock starts only when every waiter of the side being measured is
connected and watching (the server's watch count says so); every latency is timed from the same
event for both sides, the start of the sealing vote (its commit lands inside that call); the
sides alternate over ``REPEATS`` runs. Reported: ZooKeeper sessions, memory added, seal -> wake p50,
first seal -> last wake, and client CPU per waiter.

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
from typing import Any

from common import REPEATS, alternate, compare, cpu_seconds, mntr, pct
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig, PipelinePaths
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

PER_PIPELINE = 200  # partitions per pipeline (an epoch holds at most 256)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _where(name: str, i: int) -> tuple[str, str]:
    """Waiter i waits for this pipeline's partition."""
    return f"{name}-{i // PER_PIPELINE}", f"p{i % PER_PIPELINE}"


class Waiters:
    def __init__(self, hosts: str, port: int, n: int) -> None:
        self.hosts, self.port, self.n = hosts, port, n
        self.zk = KazooClient(hosts=hosts, timeout=30)
        self.zk.start(timeout=30)
        self.runs = 0
        self.extra: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}
        os.environ["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"] = json.dumps({"conn_type": "zookeeper", "host": hosts})

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _pipelines(self, name: str) -> dict[str, tuple[EpochLedger, Any]]:
        opened = {}
        for start in range(0, self.n, PER_PIPELINE):
            pipeline = _where(name, start)[0]
            ledger = EpochLedger(self.zk, pipeline, owner="bench")
            partitions = {f"p{i}": ("job",) for i in range(min(PER_PIPELINE, self.n - start))}
            ledger.create_pipeline(PipelineConfig(partitions))
            opened[pipeline] = (ledger, ledger.open_epoch(1))
        return opened

    async def _armed(self, baseline: int, timeout: float = 120.0) -> None:
        """Until every waiter's watch is set on the server: the start gate."""
        deadline = time.monotonic() + timeout
        while int(mntr(self.port)["zk_watch_count"]) < baseline + self.n:
            if time.monotonic() > deadline:
                raise RuntimeError("the waiters did not all set their watches")
            await asyncio.sleep(0.05)

    async def _seal_all(self, name: str, opened: dict[str, tuple[EpochLedger, Any]],
                        woke: dict[int, float]) -> dict[str, float]:
        sealed_at: dict[int, float] = {}
        for i in range(self.n):
            pipeline, partition = _where(name, i)
            ledger, attempt = opened[pipeline]
            sealed_at[i] = time.perf_counter()  # the same event for both sides: the vote starts
            await asyncio.to_thread(ledger.vote, attempt, partition, "job")
        deadline = time.monotonic() + 300
        while len(woke) < self.n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(woke)} of {self.n} waiters woke")
            await asyncio.sleep(0.01)
        latencies = [woke[i] - sealed_at[i] for i in sealed_at]
        return {"p50_ms": 1000 * pct(latencies, 0.5), "p95_ms": 1000 * pct(latencies, 0.95),
                "all_woke_s": max(woke.values()) - min(sealed_at.values())}

    def ours(self) -> float:
        return asyncio.run(self._ours())

    async def _ours(self) -> float:
        from airflow_epochs.triggers.seals import PartitionsSealedTrigger
        from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

        self.runs += 1
        name = f"waiters-ours-{self.runs}"
        opened = self._pipelines(name)
        gc.collect()
        baseline, rss0, cpu0 = int(mntr(self.port)["zk_watch_count"]), _rss_mb(), cpu_seconds()
        sessions0 = int(mntr(self.port)["zk_num_alive_connections"])
        woke: dict[int, float] = {}

        async def wait(i: int) -> None:
            pipeline, partition = _where(name, i)
            async for _event in PartitionsSealedTrigger(pipeline=pipeline, epoch=1, partitions=[partition]).run():
                woke[i] = time.perf_counter()
                break

        tasks = [asyncio.ensure_future(wait(i)) for i in range(self.n)]
        await self._armed(baseline)
        sessions = int(mntr(self.port)["zk_num_alive_connections"]) - sessions0
        assert SHARED_CLIENTS.sessions() == 1
        summary = await self._seal_all(name, opened, woke)
        await asyncio.gather(*tasks)
        summary.update(sessions=sessions, rss_mb=_rss_mb() - rss0, cpu_ms=1000 * (cpu_seconds() - cpu0) / self.n)
        self.extra["ours"].append(summary)
        return summary["p50_ms"]

    def peer(self) -> float:
        return asyncio.run(self._peer())

    async def _peer(self) -> float:
        self.runs += 1
        name = f"waiters-peer-{self.runs}"
        opened = self._pipelines(name)
        gc.collect()
        baseline, rss0, cpu0 = int(mntr(self.port)["zk_watch_count"]), _rss_mb(), cpu_seconds()
        sessions0 = int(mntr(self.port)["zk_num_alive_connections"])
        loop = asyncio.get_running_loop()
        woke: dict[int, float] = {}
        clients: list[KazooClient] = []

        async def wait(i: int) -> None:
            client = KazooClient(hosts=self.hosts, timeout=30)
            await asyncio.to_thread(client.start, 30)
            clients.append(client)
            pipeline, partition = _where(name, i)
            path = PipelinePaths(pipeline).seal(1, opened[pipeline][1].generation, partition)
            done = asyncio.Event()

            def created(_event: Any) -> None:  # a watch on a missing node fires once: when it is created
                loop.call_soon_threadsafe(done.set)

            if await asyncio.to_thread(client.exists, path, created) is not None:
                done.set()
            await done.wait()
            woke[i] = time.perf_counter()

        tasks = [asyncio.ensure_future(wait(i)) for i in range(self.n)]
        await self._armed(baseline, timeout=300)
        sessions = int(mntr(self.port)["zk_num_alive_connections"]) - sessions0
        summary = await self._seal_all(name, opened, woke)
        await asyncio.gather(*tasks)
        summary.update(sessions=sessions, rss_mb=_rss_mb() - rss0, cpu_ms=1000 * (cpu_seconds() - cpu0) / self.n)
        for client in clients:
            client.stop()
            client.close()
        self.extra["peer"].append(summary)
        return summary["p50_ms"]


def run_all(hosts: str, port: int, smoke: bool) -> None:
    n = 50 if smoke else 1000
    waiters = Waiters(hosts, port, n)
    try:
        waiters.ours()  # warm-up: imports, the shared session
        waiters.peer()
        waiters.extra = {"ours": [], "peer": []}
        mine, theirs = alternate(2 if smoke else REPEATS, waiters.ours, waiters.peer)
    finally:
        waiters.close()
    name = "one kazoo client per waiter"
    ours, peer = waiters.extra["ours"], waiters.extra["peer"]

    def col(rows: list[dict[str, float]], key: str) -> list[float]:
        return [row[key] for row in rows]

    compare(f"waiters_wake_p50_n{n}", "waiters", f"{n} waiters: seal -> wake p50", mine, theirs, "ms", name,
            note=f"median of {len(mine)} runs each, alternating; p95 ours "
                 f"{sorted(col(ours, 'p95_ms'))[len(ours) // 2]:.1f} ms, peer "
                 f"{sorted(col(peer, 'p95_ms'))[len(peer) // 2]:.1f} ms")
    compare(f"waiters_sessions_n{n}", "waiters", f"{n} waiters in one loop: ZooKeeper sessions",
            col(ours, "sessions"), col(peer, "sessions"), "sessions", name)
    compare(f"waiters_rss_mb_n{n}", "waiters", f"{n} waiters: memory added",
            [max(v, 0.1) for v in col(ours, "rss_mb")], col(peer, "rss_mb"), "MB", name)
    compare(f"waiters_last_wake_s_n{n}", "waiters", f"{n} waiters: first seal -> last wake",
            col(ours, "all_woke_s"), col(peer, "all_woke_s"), "s", name, note=f"{n} seals written one after another")
    compare(f"waiters_cpu_ms_n{n}", "waiters", f"{n} waiters: client CPU per waiter",
            col(ours, "cpu_ms"), col(peer, "cpu_ms"), "ms", name, note="this process, all threads")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="50 waiters instead of 1,000")
    args = parser.parse_args()
    with EmbeddedZooKeeper(max_client_connections=0) as server:
        run_all(server.hosts, server.port, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
