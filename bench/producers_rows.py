"""What the declared-producers benchmark reads back from one Airflow deployment and ZooKeeper, and the rows
it reports (``bench/producers.py`` runs the scenarios).

A *side* is one consumer DAG with the producer DAGs it waits for: ours reads the key of each run from its
``receive`` task's XCom (the declared gate's key), the peer from the run's ``partition_key``
(``PartitionedAssetTimetable``).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from common import compare, figure
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger

if TYPE_CHECKING:  # a test helper, on the path bench/producers.py sets
    from airflow_stack import AirflowStack

PEER_NAME = "Airflow's PartitionedAssetTimetable"


@dataclass(frozen=True)
class Side:
    """One scenario's pair of consumers and the producer DAGs both wait for."""

    ours: str
    peer: str
    producers: tuple[str, ...]
    pipeline: str


@dataclass
class Snapshot:
    """What the deployment shows at one moment, for one side."""

    starts: dict[str, dict[str, list[float]]]  # consumer -> key -> start of each run's first task
    ends: dict[str, float]  # key -> the last of its producers' first successes
    stages: dict[str, dict[str, tuple[float, float, float]]]  # consumer -> key -> (event, queued, started)
    seals: dict[str, float]  # key -> when ours sealed it
    pending: dict[str, int]  # key -> the peer's pending partitioned runs (AssetPartitionDagRun, no run yet)
    yields: dict[str, float] = field(default_factory=dict)  # key -> when our gate's watcher yielded its event


def snapshot(stack: AirflowStack, zk: KazooClient, side: Side) -> Snapshot:
    return Snapshot(consumer_starts(stack, side), last_successes(stack, side), run_stages(stack, side),
                    seals(zk, side.pipeline), pending_peer_runs(stack, side), watcher_yields(stack, side))


_FIRED = "Trigger fired event"
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(?:[.,]\d+)?)(Z|[+-]\d\d:?\d\d)?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _field(line: str, name: str) -> str | None:
    found = re.search(rf"[\\]?['\"]{name}[\\]?['\"]:\s*[\\]?['\"]([^'\"\\]+)", line)
    return found.group(1) if found else None


def watcher_yields(stack: AirflowStack, side: Side) -> dict[str, float]:
    """key -> when the triggerer's runner logged our gate's event as fired (its ``Trigger fired event`` line,
    stamped in the runner when the watcher yielded, before the runner hands it to its supervisor): splits
    seal -> stored event into the watcher's part and the triggerer's hand-over. Empty when no log line
    of the triggerer's could be read (the rows that need it are then left out)."""
    found: dict[str, float] = {}
    for path in sorted(stack.base.rglob("*.log")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if _FIRED not in line:
                continue
            line = _ANSI.sub("", line)
            stamp, key = _STAMP.search(line), _field(line, "partition_key")
            if stamp is None or key is None or _field(line, "pipeline") != side.pipeline:
                continue
            zone = (stamp.group(3) or "+00:00").replace("Z", "+00:00")
            zone = zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
            at = datetime.fromisoformat(f"{stamp.group(1)}T{stamp.group(2).replace(',', '.')}{zone}").timestamp()
            found[key] = min(found.get(key, at), at)
    return found


def pending_peer_runs(stack: AirflowStack, side: Side) -> dict[str, int]:
    """key -> how many pending runs the peer's scheduler holds for it (``asset_partition_dag_run`` rows with
    no DAG run yet): two for one key is apache/airflow#71070, each waiting for events the other received."""
    rows = stack.query("SELECT partition_key, count(*) FROM asset_partition_dag_run WHERE target_dag_id = %s AND "
                       "created_dag_run_id IS NULL GROUP BY partition_key", side.peer)
    return {str(key): int(count) for key, count in rows}  # type: ignore[call-overload]


def _our_keys(stack: AirflowStack, side: Side) -> dict[str, list[str]]:
    """run id -> the keys its ``receive`` task returned (ours)."""
    keys: dict[str, list[str]] = {}
    for value, run_id in stack.query("SELECT value, run_id FROM xcom WHERE dag_id = %s AND task_id = 'receive' AND "
                                     "key = 'return_value'", side.ours):
        doc = json.loads(value) if isinstance(value, str) else value
        keys[str(run_id)] = [key["partition_key"] for key in doc["keys"]]
    return keys


def consumer_starts(stack: AirflowStack, side: Side) -> dict[str, dict[str, list[float]]]:
    """consumer -> key -> start time of each of its runs' first task."""
    found: dict[str, dict[str, list[float]]] = {side.ours: {}, side.peer: {}}
    rows = stack.query("SELECT x.value, extract(epoch FROM ti.start_date) FROM xcom x JOIN task_instance ti ON "
                       "ti.dag_id = x.dag_id AND ti.run_id = x.run_id AND ti.task_id = x.task_id "
                       "WHERE x.dag_id = %s AND x.task_id = 'receive' AND x.key = 'return_value'", side.ours)
    for value, started in rows:
        doc = json.loads(value) if isinstance(value, str) else value
        for key in doc["keys"]:
            found[side.ours].setdefault(key["partition_key"], []).append(float(started))
    rows = stack.query("SELECT r.partition_key, extract(epoch FROM ti.start_date) FROM dag_run r JOIN task_instance "
                       "ti ON ti.dag_id = r.dag_id AND ti.run_id = r.run_id WHERE r.dag_id = %s AND "
                       "ti.task_id = 'receive' AND ti.start_date IS NOT NULL", side.peer)
    for key, started in rows:
        found[side.peer].setdefault(str(key), []).append(float(started))
    return found


def run_stages(stack: AirflowStack, side: Side) -> dict[str, dict[str, tuple[float, float, float]]]:
    """consumer -> key -> (its triggering asset event stored, run queued, first task started) of the
    key's first run: where the latency goes after the producers (the event: the watcher's delivery for
    ours, the producer's own success for the peer; then the scheduler's pick-up; then the executor)."""
    found: dict[str, dict[str, tuple[float, float, float]]] = {side.ours: {}, side.peer: {}}
    stages = ("SELECT r.run_id, max(extract(epoch FROM ae.timestamp)), extract(epoch FROM r.queued_at), "
              "min(extract(epoch FROM ti.start_date)) FROM dag_run r JOIN dagrun_asset_event d ON d.dag_run_id = r.id "
              "JOIN asset_event ae ON ae.id = d.event_id JOIN task_instance ti ON ti.dag_id = r.dag_id AND "
              "ti.run_id = r.run_id AND ti.task_id = 'receive' WHERE r.dag_id = %s AND ti.start_date IS NOT NULL "
              "GROUP BY r.run_id, r.queued_at")
    keys = _our_keys(stack, side)
    for run_id, key in stack.query("SELECT run_id, partition_key FROM dag_run WHERE dag_id = %s", side.peer):
        keys[str(run_id)] = [str(key)]
    for consumer in (side.ours, side.peer):
        for run_id, event, queued, started in stack.query(stages, consumer):
            for key in keys.get(str(run_id), []):
                row = (float(event), float(queued), float(started))
                if key not in found[consumer] or row[2] < found[consumer][key][2]:
                    found[consumer][key] = row
    return found


def seals(zk: KazooClient, pipeline: str) -> dict[str, float]:
    """key -> when ours sealed it (the epoch_sealed event; key k is epoch k of the declaration's calendar)."""
    from airflow_epochs.coordination.wire.events import EpochSealed

    return {f"2026-01-{e.record.epoch:02d}": e.at for e in EpochLedger(zk, pipeline, owner="bench").history()
            if isinstance(e.record, EpochSealed) and e.record.epoch is not None}


def last_successes(stack: AirflowStack, side: Side) -> dict[str, float]:
    """key -> when the last of the side's producers first succeeded for it (a producer returns its key).
    Read before any producer of the key is cleared: a cleared try rewrites its task instance's end."""
    rows = stack.query("SELECT ti.dag_id, x.value, extract(epoch FROM ti.end_date) FROM task_instance ti JOIN xcom x "
                       "ON x.dag_id = ti.dag_id AND x.run_id = ti.run_id AND x.task_id = ti.task_id AND "
                       "x.key = 'return_value' WHERE ti.dag_id IN %s AND ti.state = 'success'", side.producers)
    first: dict[str, dict[str, float]] = {}
    for dag_id, value, ended in rows:
        done = first.setdefault(str(value), {})  # psycopg2 decodes the JSON value: the key itself
        done[dag_id] = min(done.get(dag_id, float(ended)), float(ended))
    return {key: max(done.values()) for key, done in first.items() if len(done) == len(side.producers)}


def report(scenario: str, side: Side, snap: Snapshot, complete: list[str], incomplete: list[str], note: str) -> None:
    """``producers_duplicate_runs``, ``producers_missed_keys`` and ``producers_latency_s`` (with its stages)
    of one scenario, ours beside the peer; row ids end in ``[scenario]``."""
    result: dict[str, tuple[int, int]] = {}
    latency: dict[str, list[float]] = {}
    for consumer in (side.ours, side.peer):
        runs = {key: snap.starts[consumer].get(key, []) for key in (*complete, *incomplete)}
        duplicates = sum(max(0, len(runs[key]) - 1) for key in complete) + sum(len(runs[key]) for key in incomplete)
        missed = sum(1 for key in complete if not runs[key])
        result[consumer] = (duplicates, missed)
        latency[consumer] = [min(runs[key]) - snap.ends[key] for key in complete if runs[key] and key in snap.ends]
        if consumer == side.peer:
            print(f"  [{scenario}] {consumer}: pending partitioned runs per key {snap.pending}", flush=True)
        print(f"  [{scenario}] {consumer}: runs per key { {k: len(v) for k, v in runs.items()} }, duplicates "
              f"{duplicates}, missed {missed}, latency {[round(v, 2) for v in latency[consumer]]}", flush=True)
    ours, peer = result[side.ours], result[side.peer]
    stuck = {key: n for key, n in snap.pending.items() if key in complete and not snap.starts[side.peer].get(key)}
    if stuck:
        note += f"; the peer holds pending runs {stuck} for the keys it missed"
    compare(f"producers_duplicate_runs[{scenario}]", "producers", "consumer runs beyond one per complete key "
            "(or any for an incomplete key)", [ours[0]], [peer[0]], "runs", PEER_NAME, note=note)
    compare(f"producers_missed_keys[{scenario}]", "producers", "complete keys the consumer never ran for",
            [ours[1]], [peer[1]], "keys", PEER_NAME, note=note)
    if latency[side.ours] and latency[side.peer]:
        compare(f"producers_latency_s[{scenario}]", "producers", "last producer success -> consumer task running "
                "(median over keys)", latency[side.ours], latency[side.peer], "s", PEER_NAME,
                note=f"{note}; ours {len(latency[side.ours])} keys, peer {len(latency[side.peer])}")
    report_stages(scenario, side, snap, complete)


def report_rerun(scenario: str, side: Side, before: Snapshot, after: Snapshot, keys: list[str], note: str) -> None:
    """A re-run of producers after their key was consumed: the consumer runs each side added for the keys."""
    print(f"  [{scenario}] {side.peer}: pending partitioned runs per key {after.pending}", flush=True)
    added = {consumer: sum(len(after.starts[consumer].get(key, [])) - len(before.starts[consumer].get(key, []))
                           for key in keys) for consumer in (side.ours, side.peer)}
    print(f"  [{scenario}] consumer runs added by the re-run of {keys}: {added}", flush=True)
    compare(f"producers_duplicate_runs[{scenario}]", "producers", "consumer runs added by re-running a consumed "
            "key's producers (data unchanged)", [added[side.ours]], [added[side.peer]], "runs", PEER_NAME, note=note)


def report_stages(scenario: str, side: Side, snap: Snapshot, complete: list[str]) -> None:
    """Where each consumer's latency goes, per stage (medians over keys): the last producer's success to
    the triggering asset event stored, to the run queued, to its first task running."""
    split: dict[str, dict[str, list[float]]] = {}
    for consumer in (side.ours, side.peer):
        split[consumer] = {"event": [], "queue": [], "start": []}
        for key in complete:
            if key not in snap.stages[consumer] or key not in snap.ends:
                continue
            event, queued, started = snap.stages[consumer][key]
            split[consumer]["event"].append(event - snap.ends[key])
            split[consumer]["queue"].append(queued - event)
            split[consumer]["start"].append(started - queued)
        print(f"  [{scenario}] {consumer} stages: "
              f"{ {k: [round(v, 2) for v in vs] for k, vs in split[consumer].items()} }", flush=True)
    sealed = [snap.seals[key] - snap.ends[key] for key in complete if key in snap.seals and key in snap.ends]
    print(f"  [{scenario}] ours sealed relative to the last producer's success: {[round(v, 2) for v in sealed]} s",
          flush=True)
    delivered = [snap.stages[side.ours][key][0] - snap.seals[key] for key in complete
                 if key in snap.seals and key in snap.stages[side.ours]]
    yielded = [snap.yields[key] - snap.seals[key] for key in complete if key in snap.seals and key in snap.yields]
    handed = [snap.stages[side.ours][key][0] - snap.yields[key] for key in complete
              if key in snap.yields and key in snap.stages[side.ours]]
    print(f"  [{scenario}] ours seal -> watcher yielded {[round(v, 3) for v in yielded]} s, yielded -> event stored "
          f"{[round(v, 3) for v in handed]} s", flush=True)
    if yielded and handed:
        figure(f"producers_seal_to_yield_s[{scenario}]", "producers", "ours: seal -> the gate's watcher yielded the "
               "event (ZooKeeper watch and the watcher's reads)", statistics.median(yielded), "s",
               note=f"median over {len(yielded)} keys; {min(yielded):.3f}..{max(yielded):.3f} s")
        figure(f"producers_yield_to_event_s[{scenario}]", "producers", "ours: the watcher yielded -> the asset event "
               "stored (the trigger runner's loop and its supervisor)", statistics.median(handed), "s",
               note=f"median over {len(handed)} keys; {min(handed):.3f}..{max(handed):.3f} s")
    if delivered:
        figure(f"producers_seal_to_event_s[{scenario}]", "producers", "ours: seal -> the gate's asset event stored "
               "(the triggerer's delivery)", statistics.median(delivered), "s",
               note=f"median over {len(delivered)} keys; {min(delivered):.2f}..{max(delivered):.2f} s")
    measures = {"event": "last producer success -> the consumer's triggering asset event stored",
                "queue": "asset event stored -> consumer run queued (scheduler pick-up)",
                "start": "consumer run queued -> its first task running"}
    for stage, measure in measures.items():
        if split[side.ours][stage] and split[side.peer][stage]:
            # ours' event can come before the last success (the vote, and so the seal, precedes the success
            # report): a negative stage has no ratio
            signed = stage == "event" and min(split[side.ours][stage] + split[side.peer][stage]) <= 0
            compare(f"producers_latency_{stage}_s[{scenario}]", "producers", measure, split[side.ours][stage],
                    split[side.peer][stage], "s", PEER_NAME, better="none" if signed else "lower",
                    note=(f"median over keys; ours sealed {statistics.median(sealed):.2f} s after the last success"
                          if sealed else "median over keys"))
