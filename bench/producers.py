"""Declared producers vs Airflow's own partitioned-asset scheduling, under real schedulers.

One Airflow deployment on PostgreSQL (tests/helpers/airflow_stack.py) with two schedulers and two triggerers
runs the three plain producer DAGs of tests/dags/declared_producers.py over several keys, plus a
fourth key that only one producer completes and, once a key has been consumed, a second run of one
producer for that key. Two consumers watch the same producers in the same run: ours
(tests/dags/declared_consumer.py: the declared partition's gate) and the peer
(bench/dags/producers_peer.py: ``PartitionedAssetTimetable`` on the three assets, no provider code).

Rows: duplicate consumer runs (runs beyond one per complete key, plus runs for the incomplete key),
missed keys (complete keys with no run), and the latency from a key's last producer success to its
consumer's first task starting (median over keys).

    python bench/producers.py [--smoke]      # alone; bench/run.py --only producers includes it
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import compare
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "helpers"))
from airflow_stack import AirflowStack  # noqa: E402
from declared_sales import DECLARED  # noqa: E402

PRODUCERS = ("prod_eu", "prod_us", "prod_returns")
OURS, PEER = "sales_report", "sales_report_peer"


def _trigger(stack: AirflowStack, dag_id: str, key: str) -> None:
    done = stack.airflow("dags", "trigger", dag_id, "-c", json.dumps({"key": key}))
    if done.returncode:
        raise RuntimeError(f"airflow dags trigger {dag_id}: {done.stderr[-2000:]}")


def _consumer_starts(stack: AirflowStack) -> dict[str, dict[str, list[float]]]:
    """consumer -> key -> start time of each of its runs' first task."""
    found: dict[str, dict[str, list[float]]] = {OURS: {}, PEER: {}}
    rows = stack.query("SELECT x.value, extract(epoch FROM ti.start_date) FROM xcom x JOIN task_instance ti ON "
                       "ti.dag_id = x.dag_id AND ti.run_id = x.run_id AND ti.task_id = x.task_id "
                       "WHERE x.dag_id = %s AND x.task_id = 'receive' AND x.key = 'return_value'", OURS)
    for value, started in rows:
        doc = json.loads(value) if isinstance(value, str) else value
        for key in doc["keys"]:
            found[OURS].setdefault(key["partition_key"], []).append(float(started))
    rows = stack.query("SELECT r.partition_key, extract(epoch FROM ti.start_date) FROM dag_run r JOIN task_instance "
                       "ti ON ti.dag_id = r.dag_id AND ti.run_id = r.run_id WHERE r.dag_id = %s AND "
                       "ti.task_id = 'receive' AND ti.start_date IS NOT NULL", PEER)
    for key, started in rows:
        found[PEER].setdefault(str(key), []).append(float(started))
    return found


def _run_stages(stack: AirflowStack) -> dict[str, dict[str, tuple[float, float, float]]]:
    """consumer -> key -> (its triggering asset event stored, run queued, first task started) of the
    key's first run: where the latency goes after the producers (the event: the watcher's delivery for
    ours, the producer's own success for the peer; then the scheduler's pick-up; then the executor)."""
    found: dict[str, dict[str, tuple[float, float, float]]] = {OURS: {}, PEER: {}}
    stages = ("SELECT r.run_id, max(extract(epoch FROM ae.timestamp)), extract(epoch FROM r.queued_at), "
              "min(extract(epoch FROM ti.start_date)) FROM dag_run r JOIN dagrun_asset_event d ON d.dag_run_id = r.id "
              "JOIN asset_event ae ON ae.id = d.event_id JOIN task_instance ti ON ti.dag_id = r.dag_id AND "
              "ti.run_id = r.run_id AND ti.task_id = 'receive' WHERE r.dag_id = %s AND ti.start_date IS NOT NULL "
              "GROUP BY r.run_id, r.queued_at")
    keys: dict[str, list[str]] = {}
    for value, run_id in stack.query("SELECT value, run_id FROM xcom WHERE dag_id = %s AND task_id = 'receive' AND "
                                     "key = 'return_value'", OURS):
        doc = json.loads(value) if isinstance(value, str) else value
        keys[str(run_id)] = [key["partition_key"] for key in doc["keys"]]
    for run_id, key in stack.query("SELECT run_id, partition_key FROM dag_run WHERE dag_id = %s", PEER):
        keys[str(run_id)] = [str(key)]
    for consumer in (OURS, PEER):
        for run_id, event, queued, started in stack.query(stages, consumer):
            for key in keys.get(str(run_id), []):
                row = (float(event), float(queued), float(started))
                if key not in found[consumer] or row[2] < found[consumer][key][2]:
                    found[consumer][key] = row
    return found


def _seals(zk: KazooClient) -> dict[str, float]:
    """key -> when ours sealed it (the epoch_sealed event; key k is epoch k of the declaration's calendar)."""
    from airflow_epochs.coordination.wire.events import EpochSealed

    return {f"2026-01-{e.record.epoch:02d}": e.at for e in EpochLedger(zk, "declared", owner="bench").history()
            if isinstance(e.record, EpochSealed) and e.record.epoch is not None}


def _last_successes(stack: AirflowStack) -> dict[str, float]:
    """key -> when the last of the three producers first succeeded for it (a producer returns its key)."""
    rows = stack.query("SELECT ti.dag_id, x.value, extract(epoch FROM ti.end_date) FROM task_instance ti JOIN xcom x "
                       "ON x.dag_id = ti.dag_id AND x.run_id = ti.run_id AND x.task_id = ti.task_id AND "
                       "x.key = 'return_value' WHERE ti.dag_id IN %s AND ti.state = 'success'", PRODUCERS)
    first: dict[str, dict[str, float]] = {}
    for dag_id, value, ended in rows:
        done = first.setdefault(str(value), {})  # psycopg2 decodes the JSON value: the key itself
        done[dag_id] = min(done.get(dag_id, float(ended)), float(ended))
    return {key: max(done.values()) for key, done in first.items() if len(done) == len(PRODUCERS)}


def measure(hosts: str, keys: int, smoke: bool) -> None:
    complete = [f"2026-01-{day:02d}" for day in range(1, keys + 1)]
    incomplete = f"2026-01-{keys + 1:02d}"
    with tempfile.TemporaryDirectory(prefix="epochs-bench-producers-") as tmp:
        zk = KazooClient(hosts=hosts)
        zk.start(timeout=30)
        env = {"AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": hosts}),
               "AIRFLOW__EPOCHS__DECLARED_PIPELINES": "declared"}
        stack = AirflowStack(Path(tmp), env=env)
        try:
            EpochLedger(zk, "declared", owner="bench").create_pipeline(DECLARED.pipeline_config())
            stack.start([REPO / "tests" / "dags" / "declared_producers.py",
                         REPO / "tests" / "dags" / "declared_consumer.py", HERE / "dags" / "producers_peer.py"])
            stack.spawn("scheduler-2", ["scheduler"])
            stack.spawn("triggerer-2", ["triggerer"])
            stack.wait_for_dags([OURS, PEER, *PRODUCERS])
            for dag_id in (OURS, PEER, *PRODUCERS):
                stack.airflow("dags", "unpause", dag_id)
            for key in complete:
                for dag_id in PRODUCERS:
                    _trigger(stack, dag_id, key)
            _trigger(stack, "prod_eu", incomplete)
            deadline = time.monotonic() + (600 if smoke else 1200)
            while time.monotonic() < deadline:
                starts = _consumer_starts(stack)
                if all(key in starts[OURS] and key in starts[PEER] for key in complete):
                    break
                time.sleep(3)
            _trigger(stack, "prod_us", complete[0])  # a producer runs again for a consumed key
            time.sleep(60)  # room for what that re-run starts, and for late duplicates
            starts = _consumer_starts(stack)
            last = _last_successes(stack)
            ends = {key: last.get(key) for key in complete}
            stages, seals = _run_stages(stack), _seals(zk)
        finally:
            stack.stop()
            zk.stop()
            zk.close()
    report(starts, ends, complete, incomplete, keys)
    report_stages(stages, seals, ends)


def report(starts: dict[str, dict[str, list[float]]], ends: dict[str, float | None], complete: list[str],
           incomplete: str, keys: int) -> None:
    """The rows, from each consumer's runs per key and each key's last producer success."""
    result: dict[str, dict[str, float]] = {}
    latency: dict[str, list[float]] = {}
    for consumer in (OURS, PEER):
        runs = starts[consumer]
        duplicates = sum(max(0, len(runs.get(key, [])) - 1) for key in complete) + len(runs.get(incomplete, []))
        missed = sum(1 for key in complete if not runs.get(key))
        result[consumer] = {"duplicates": duplicates, "missed": missed}
        latency[consumer] = [min(runs[key]) - end for key, end in ends.items() if runs.get(key) and end is not None]
        print(f"  {consumer}: runs per key {dict(sorted((k, len(v)) for k, v in runs.items()))}, "
              f"duplicates {duplicates}, missed {missed}, latency {latency[consumer]}", flush=True)
    note = (f"{keys} complete keys x 3 plain producers + 1 incomplete key + 1 producer re-run; 2 schedulers, "
            "2 triggerers, PostgreSQL")
    peer_name = "PartitionedAssetTimetable on the 3 assets"
    compare("producers_duplicate_runs", "producers", "consumer runs beyond one per complete key",
            [result[OURS]["duplicates"]], [result[PEER]["duplicates"]], "runs", peer_name, note=note)
    compare("producers_missed_keys", "producers", "complete keys the consumer never ran for",
            [result[OURS]["missed"]], [result[PEER]["missed"]], "keys", peer_name, note=note)
    if latency[OURS] and latency[PEER]:
        compare("producers_latency_s", "producers", "last producer success -> consumer task running (median)",
                latency[OURS], latency[PEER], "s", peer_name,
                note=f"median over keys; ours {statistics.median(latency[OURS]):.2f} s")


def report_stages(stages: dict[str, dict[str, tuple[float, float, float]]], seals: dict[str, float],
                  ends: dict[str, float | None]) -> None:
    """Where each consumer's latency goes, per stage (medians over keys): the last producer's success to
    the triggering asset event stored, to the run queued, to its first task running."""
    split: dict[str, dict[str, list[float]]] = {}
    for consumer in (OURS, PEER):
        split[consumer] = {"event": [], "queue": [], "start": []}
        for key, (event, queued, started) in sorted(stages[consumer].items()):
            end = ends.get(key)
            if end is None:
                continue
            split[consumer]["event"].append(event - end)
            split[consumer]["queue"].append(queued - event)
            split[consumer]["start"].append(started - queued)
        print(f"  {consumer} stages: { {k: [round(v, 2) for v in vs] for k, vs in split[consumer].items()} }",
              flush=True)
    sealed = [seals[key] - end for key, end in ends.items() if key in seals and end is not None]
    print(f"  ours sealed relative to the last producer's success: {[round(v, 2) for v in sealed]} s", flush=True)
    peer_name = "PartitionedAssetTimetable on the 3 assets"
    measures = {"event": "last producer success -> the consumer's triggering asset event stored",
                "queue": "asset event stored -> consumer run queued (scheduler pick-up)",
                "start": "consumer run queued -> its first task running"}
    for stage, measure in measures.items():
        if split[OURS][stage] and split[PEER][stage]:
            compare(f"producers_latency_{stage}_s", "producers", measure, split[OURS][stage], split[PEER][stage],
                    "s", peer_name, note=f"median over keys; ours sealed {statistics.median(sealed):.2f} s after the "
                    "last success" if sealed else "median over keys")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="two keys")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        measure(server.hosts, 2 if args.smoke else 3, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
