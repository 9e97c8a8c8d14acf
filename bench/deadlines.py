"""Partition deadlines (group ``deadlines``): a run of epochs whose three producers vote after durations
drawn from a fixed, seeded distribution, with one producer delayed on purpose in a known set of epochs: the
slowest one (``enrich``), and, in another set, a faster one (``ingest``) while the slowest votes on time,
so that the slowest producer's vote moves the predicted deadline earlier (to the late producer's).
A watcher (``ledger.deadlines().wait``, on a client of its own) watches every epoch against a predicted
deadline (the 0.8 quantile of each missing producer's learned vote time, plus a slack).

Rows: how soon after the deadline the alert fires (p50 and max; and the max over the epochs where the
deadline moved earlier with a vote, measured from the moved deadline), false and missed alerts (0 and 0
expected: the delayed set is known), the median absolute error of the typical (median) prediction made
when the epoch opened against the real seal time, in percent of the real time to seal, beside the
rule of Airflow's ``AverageRuntimeDeadline`` (the mean of the recent runs' durations) on the same
epochs, and the ZooKeeper reads of one prediction (bounded: the same at the first predicted epoch
and the last).

A second scenario: a hundred partitions of one epoch with the same fixed deadline, none of them ever
voted, each watched by its own watch on one shared session, as a triggerer holds a hundred deadline
triggers. Rows ``deadline_100_watches_alert_latency_s_p50/max``: how soon after the shared deadline each
watch holds its alert (raised and marked delivered), ours (the family's asynchronous watch, no thread
held while waiting) beside a thread per watch (``deadlines.wait`` on asyncio's default pool, cpus + 4
threads, the way a trigger would run a blocking wait), best of ``REPEATS`` runs each, alternating.
"""

from __future__ import annotations

import asyncio
import functools
import random
import statistics
import threading
import time
import uuid

from common import Row, add, alternate, client, figure, pct
from kazoo.client import KazooClient

from airflow_epochs.coordination import DeadlineSpec, EpochLedger, PipelineConfig
from airflow_epochs.coordination.base.aio import AsyncZooKeeper

PRODUCERS = {"ingest": 0.20, "enrich": 0.30, "audit": 0.25}  # base seconds after the epoch opens
DELAYED = "enrich"  # the slowest producer
FAST_DELAYED = "ingest"  # a faster one: when it is late, the slowest's vote moves the deadline earlier
DELAY = 1.5  # seconds added to the delayed producer in the delayed epochs
SLACK = 0.25
QUANTILE = 0.8
FIRST_PREDICTED = 6  # MIN_SAMPLES sealed epochs of history first


def _epoch(ledger: EpochLedger, watcher: EpochLedger, epoch: int, durations: dict[str, float],
           out: dict[str, object]) -> None:
    attempt = ledger.open_epoch(epoch)
    before = watcher.session.stats["reads"]
    forecast = watcher.deadlines(window=32).predicted_seal(epoch, "p", quantile=QUANTILE)
    out["reads"] = watcher.session.stats["reads"] - before
    out["forecast"] = forecast
    result: dict[str, object] = {}

    def watch() -> None:
        verdict = watcher.deadlines(window=32).wait(epoch, "p", timeout=30)
        result["verdict"], result["at"] = verdict, time.time()
        if verdict.deliver and verdict.alert is not None:
            watcher.deadlines().delivered(verdict.alert)

    watching = threading.Thread(target=watch)
    watching.start()
    started = time.monotonic()
    for producer, seconds in sorted(durations.items(), key=lambda item: item[1]):
        time.sleep(max(0.0, started + seconds - time.monotonic()))
        ledger.vote(attempt, "p", producer, {"rows": 1})
    watching.join(60)
    out.update(result)
    out["opened_at"] = ledger.epoch_info(epoch).opened_at
    out["sealed_at"] = ledger.seal_record(epoch, "p").sealed_at


WATCHES = 100
SHARED_DEADLINE = 2.0  # seconds after the epoch opens: every watch is armed well before it
REPEATS = 3


def _many_watches(zk: KazooClient, *, threaded: bool) -> list[float]:
    """One run of the hundred-watches scenario on a fresh pipeline; each watch's lag after the deadline."""
    pipeline = f"deadlines-many-{uuid.uuid4().hex[:8]}"
    names = [f"part{i:03d}" for i in range(WATCHES)]
    setup = EpochLedger(zk, pipeline, owner="bench")
    setup.create_pipeline(PipelineConfig({name: ("x",) for name in names}))
    for name in names:
        setup.deadlines().declare(DeadlineSpec(name, mode="fixed", anchor="opened", delta=SHARED_DEADLINE))
    done: dict[str, float] = {}

    async def ours(name: str) -> None:
        deadlines = EpochLedger(zk, pipeline, owner=f"w-{name}").deadlines()
        store = AsyncZooKeeper(zk, asyncio.get_running_loop())
        changed = asyncio.Event()
        verdict = await deadlines.watch(1, name).run(store, changed, store.watcher(lambda _e: changed.set()))
        if verdict.deliver and verdict.alert is not None:
            done[name] = time.time()
            await asyncio.get_running_loop().run_in_executor(None, deadlines.delivered, verdict.alert)

    def blocking(name: str) -> None:
        deadlines = EpochLedger(zk, pipeline, owner=f"w-{name}").deadlines()
        verdict = deadlines.wait(1, name, timeout=60)
        if verdict.deliver and verdict.alert is not None:
            done[name] = time.time()
            deadlines.delivered(verdict.alert)

    async def scenario() -> None:
        await asyncio.to_thread(setup.open_epoch, 1)
        loop = asyncio.get_running_loop()
        if threaded:
            await asyncio.gather(*(loop.run_in_executor(None, functools.partial(blocking, n)) for n in names))
        else:
            await asyncio.gather(*(ours(n) for n in names))

    asyncio.run(scenario())
    deadline = setup.epoch_info(1).opened_at + SHARED_DEADLINE
    if len(done) != WATCHES:
        raise RuntimeError(f"{WATCHES - len(done)} of {WATCHES} watches held no alert")
    return sorted(at - deadline for at in done.values())


def run_many(hosts: str) -> None:
    zk = client(hosts)
    runs: dict[bool, list[list[float]]] = {False: [], True: []}

    def side(threaded: bool) -> float:
        lags = _many_watches(zk, threaded=threaded)
        runs[threaded].append(lags)
        return max(lags)

    try:
        alternate(REPEATS, lambda: side(False), lambda: side(True))
    finally:
        zk.stop()
        zk.close()
    best = {side_: min(lags_, key=max) for side_, lags_ in runs.items()}  # the run with the lowest max
    peer_name = "a thread per watch (deadlines.wait on the default pool, cpus + 4 threads)"
    for suffix, pick in (("p50", statistics.median), ("max", max)):
        add(Row(f"deadline_{WATCHES}_watches_alert_latency_s_{suffix}", "deadlines",
                f"{WATCHES} watches of one deadline on one session: alert after the deadline, {suffix}",
                pick(best[False]), pick(best[True]), "s", peer_name,
                ours_spread=(min(pick(r) for r in runs[False]), max(pick(r) for r in runs[False])),
                peer_spread=(min(pick(r) for r in runs[True]), max(pick(r) for r in runs[True])),
                note=f"best of {REPEATS} runs each, alternating; spreads over the runs"))


def run(hosts: str, epochs: int) -> None:
    run_many(hosts)
    rng = random.Random(38)
    delayed = {e for e in range(FIRST_PREDICTED, epochs + 1) if e % 10 == 7}
    fast_delayed = {e for e in range(FIRST_PREDICTED, epochs + 1) if e % 10 == 3 or e == FIRST_PREDICTED + 3}
    pipeline = f"deadlines-{uuid.uuid4().hex[:8]}"
    clients = [client(hosts), client(hosts)]
    try:
        _measure(clients, pipeline, epochs, rng, delayed, fast_delayed)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()


def _measure(clients: list[KazooClient], pipeline: str, epochs: int, rng: random.Random, slow_delayed: set[int],
             fast_delayed: set[int]) -> None:
    delayed = slow_delayed | fast_delayed
    ledger = EpochLedger(clients[0], pipeline, owner="bench")
    watcher = EpochLedger(clients[1], pipeline, owner="watcher")
    ledger.create_pipeline(PipelineConfig({"p": tuple(PRODUCERS)}))
    watcher.deadlines().declare(DeadlineSpec("p", mode="predicted", quantile=QUANTILE, slack=SLACK))
    runs: dict[int, dict[str, object]] = {}
    for epoch in range(1, epochs + 1):
        durations = {name: base + rng.uniform(0.0, 0.1) for name, base in PRODUCERS.items()}
        if epoch in slow_delayed:
            durations[DELAYED] += DELAY
        if epoch in fast_delayed:
            durations[FAST_DELAYED] += DELAY
        runs[epoch] = {}
        _epoch(ledger, watcher, epoch, durations, runs[epoch])

    predicted = [e for e in runs if e >= FIRST_PREDICTED]
    alerted = {e for e in predicted if getattr(runs[e].get("verdict"), "alert", None) is not None}
    latencies = [float(runs[e]["at"]) - float(runs[e]["verdict"].deadline_at) for e in alerted]  # type: ignore[union-attr]
    figure("deadline_alert_latency_s_p50", "deadlines", "alert after its deadline, p50",
           statistics.median(latencies) if latencies else None, "s", f"{len(latencies)} alerts")
    figure("deadline_alert_latency_s_max", "deadlines", "alert after its deadline, max",
           max(latencies) if latencies else None, "s", f"{len(latencies)} alerts")
    moved = [float(runs[e]["at"]) - float(runs[e]["verdict"].deadline_at)  # type: ignore[union-attr]
             for e in alerted & fast_delayed]
    figure("deadline_moved_alert_latency_s_max", "deadlines",
           "alert after a deadline that a vote moved earlier (a faster producer late), max",
           max(moved) if moved else None, "s", f"{len(moved)} alerts of {len(fast_delayed)} epochs")
    figure("deadline_false_alerts", "deadlines", "alerts for partitions not delayed", len(alerted - delayed), "alerts",
           f"{len(predicted) - len(delayed)} epochs on time")
    figure("deadline_missed_alerts", "deadlines", "delayed partitions without an alert", len(delayed - alerted),
           "alerts", f"{len(delayed)} epochs delayed")
    ours, peer = [], []
    for e in predicted:
        if e in delayed:
            continue
        run_ = runs[e]
        opened, sealed = float(run_["opened_at"]), float(run_["sealed_at"])  # type: ignore[arg-type]
        real = sealed - opened
        typical = run_["forecast"].typical_at  # type: ignore[union-attr]
        ours.append(abs(float(typical) - sealed) / real * 100)
        # AverageRuntimeDeadline's rule: the mean duration of the recent runs (delayed ones included)
        recent = [float(runs[p]["sealed_at"]) - float(runs[p]["opened_at"])  # type: ignore[arg-type]
                  for p in range(max(1, e - 10), e)]
        peer.append(abs(statistics.mean(recent) - real) / real * 100)
    add(Row("predicted_seal_error_pct", "deadlines", "median |typical prediction - real seal| / time to seal",
            statistics.median(ours), statistics.median(peer), "%", "mean of the last 10 runs (AverageRuntimeDeadline)",
            note=f"{len(ours)} epochs not delayed"))
    reads = [int(runs[e]["reads"]) for e in predicted]  # type: ignore[call-overload]
    figure("predict_requests_per_epoch", "deadlines", "ZooKeeper reads of one prediction (max over the run)",
           max(reads), "reads", f"first predicted epoch {reads[0]}, last {reads[-1]}, p50 {pct(reads, 0.5)}")
