"""Wake latency (group ``wake``): a seal -> the deferred sensor's trigger fires, against a poke-mode
sensor (check, sleep ``poke_interval``, repeat).

Both sides are timed from the same event, the start of the sealing vote (its commit lands inside
that call), and both wait for a seal that lands at a random moment: ours on ZooKeeper watches in an
event loop, the peer polling. Rounds alternate which side goes first; ours takes a batch of samples
per round (its figures are milliseconds, the peer's seconds).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time

from common import client, compare, pct

from airflow_epochs.coordination import EpochLedger, PipelineConfig


def run(hosts: str, samples: int, poke_plan: list[tuple[float, int]]) -> None:
    os.environ["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"] = json.dumps({"conn_type": "zookeeper", "host": hosts})
    from airflow_epochs.triggers.seals import PartitionsSealedTrigger

    zk = client(hosts)
    ledger = EpochLedger(zk, "wake", owner="bench")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    epochs = iter(range(1, 10_000))

    async def ours_once() -> float:
        epoch = next(epochs)
        attempt = await asyncio.to_thread(ledger.open_epoch, epoch)
        trigger = PartitionsSealedTrigger(pipeline="wake", epoch=epoch, partitions=["out"])
        events = trigger.run()
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.05 + random.uniform(0, 0.05))
        sealed = time.perf_counter()
        await asyncio.to_thread(ledger.vote, attempt, "out", "job")
        await waiting
        woke = time.perf_counter()
        await events.aclose()
        return woke - sealed

    async def ours_samples(n: int) -> list[float]:
        return [await ours_once() for _ in range(n)]

    asyncio.run(ours_samples(2))  # warm-up: the shared session, imports
    mine: list[float] = []
    for interval, count in poke_plan:
        batch = max(1, samples // count)
        ours_rounds: list[float] = []
        poked: list[float] = []
        for i in range(count):
            if i % 2 == 0:
                ours_rounds += asyncio.run(ours_samples(batch))
                poked.append(_poke_once(ledger, next(epochs), interval))
            else:
                poked.append(_poke_once(ledger, next(epochs), interval))
                ours_rounds += asyncio.run(ours_samples(batch))
        mine += ours_rounds
        compare(f"wake_vs_poke_{interval:g}s", "wake", f"seal -> sensor notices, vs poke every {interval:g} s (p50)",
                [pct(ours_rounds, 0.5) * 1000], [p * 1000 for p in poked], "ms",
                f"poke-mode sensor, poke_interval={interval:g}s",
                note=f"{count} alternating rounds; ours: median of {len(ours_rounds)} samples, peer: of {count}")
    compare("wake_p50_ms", "wake", "seal -> waiting trigger wakes, p50", [pct(mine, 0.5) * 1000], None, "ms", "-",
            better="none", note=f"{len(mine)} samples; p95 {pct(mine, 0.95) * 1000:.1f} ms")
    zk.stop()


def _poke_once(ledger: EpochLedger, epoch: int, interval: float) -> float:
    """A poke-mode sensor: check, sleep ``interval``, repeat; the seal lands at a random phase."""
    sealed_at: list[float] = []
    attempt = ledger.open_epoch(epoch)

    def seal() -> None:
        time.sleep(random.uniform(0, interval))
        sealed_at.append(time.perf_counter())
        ledger.vote(attempt, "out", "job")

    sealer = threading.Thread(target=seal)
    sealer.start()
    while ledger.seal_record(epoch, "out") is None:
        time.sleep(interval)
    seen = time.perf_counter()
    sealer.join()
    return seen - sealed_at[0]
