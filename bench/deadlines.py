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
"""

from __future__ import annotations

import random
import statistics
import threading
import time
import uuid

from common import Row, add, client, figure, pct
from kazoo.client import KazooClient

from airflow_epochs.coordination import DeadlineSpec, EpochLedger, PipelineConfig

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


def run(hosts: str, epochs: int) -> None:
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
