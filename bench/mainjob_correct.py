"""The ``mainjob`` group's correction scenario: a corrected weather feed of a sealed day lands after the
catch-up, and each side re-produces what it must, its own way:

- ours: one run of ``nycflights_correct`` (re-seal ``weather`` at that day as a new version, then
  re-produce exactly the seals that read the old one: that day's ``daily`` and every later ``daily``,
  which read the running totals); ``nycflights_report`` runs again by itself for each re-sealed ``daily``
  (the correction emits an asset event per re-sealed day);
- Airflow alone: what its UI's "Clear" with *Downstream* and *Future* does on ``hourly_weather`` of that
  day (``clearTaskInstances``: the weather and join of that day and of every later day, the later days'
  join reading the totals), and the same on the report DAG's sensor (the reports do not know by
  themselves);
- Dagster: a backfill of ``weather`` at that day, ``daily`` from that day on and ``report`` from that day
  on (the partition and its downstream, ``daily`` depending on its previous day).

What each re-ran is read back from its own records (ZooKeeper's history; the task instances that ran
again; the backfill's steps); the figures are checked afterwards against one Spark computation over the
corrected raw files.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Any

OUTSIDE = ("epoch_opened", "attempt_started", "partition_sealed", "epoch_sealed", "rolled_back")


@dataclass
class Correction:
    """What one side re-ran for the correction."""

    side: str
    spark_jobs: int = 0  # Spark jobs that ran again
    reports: int = 0  # report runs (or steps) that ran again
    detail: str = ""
    seconds: float = 0.0
    exact: dict[int, bool] = field(default_factory=dict)  # day -> equal to one Spark computation afterwards
    check: str = ""


def _wait(what: str, done: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        state = done()
        if state is True:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {state} after {timeout:.0f} s")
        time.sleep(2)


def correct_ours(stack: Any, zk: Any, day: int, days: int, timeout: float) -> Correction:
    from airflow_epochs.coordination import EpochLedger

    ledger = EpochLedger(zk, "nycflights", owner="bench-correct")
    seen = max((e.seq for e in ledger.history()), default=-1)
    started = time.monotonic()
    since = stack.query("SELECT coalesce(max(id), 0) FROM dag_run")[0][0]
    for dag_id in ("nycflights_correct", "nycflights_report"):
        stack.unpause(dag_id)
    run_id = stack.trigger("nycflights_correct", {"epoch": day, "feed": "weather",
                                                  "reason": f"corrected weather feed of day {day}"})
    want = list(range(day, days + 1))  # that day's daily and every later one read the old version

    def reran() -> list[int]:
        # The correction's asset events (one per re-sealed daily) schedule the report again by itself.
        return sorted(int(str(key)) for (key,) in stack.query(
            "SELECT partition_key FROM dag_run WHERE dag_id = 'nycflights_report' AND id > %s AND "
            "partition_key IS NOT NULL AND state = 'success'", since))

    def done() -> bool | str:
        [(state,)] = stack.query("SELECT state FROM dag_run WHERE dag_id = 'nycflights_correct' AND run_id = %s",
                                 run_id)
        if state == "failed":
            raise RuntimeError(f"nycflights_correct ended failed\n{stack.log_tail('scheduler')}")
        reports = reran()
        return True if state == "success" and reports == want else f"run {state}, reports again for days {reports}"

    try:
        _wait("ours' correction", done, timeout)
    finally:
        for dag_id in ("nycflights_correct", "nycflights_report"):
            stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    events = ledger.history(since_seq=seen)
    versions = [(e.detail.get("epoch"), e.detail.get("partition")) for e in events if e.event == "version_sealed"]
    outside = [f"{e.event} {e.detail.get('epoch')}" for e in events if e.event in OUTSIDE]
    reports = reran()
    return Correction("ours", spark_jobs=len(versions), reports=len(reports),
                      detail=f"new versions {sorted(versions, key=str)}; other events {outside or 'none'}; the "
                      f"report re-ran by itself for days {reports} (an asset event per re-sealed daily)",
                      seconds=time.monotonic() - started)


def correct_airflow(stack: Any, dags: tuple[str, str], first: datetime.date, day: int, days: int,
                    timeout: float) -> Correction:
    daily, report = dags
    start = datetime.datetime.combine(first + datetime.timedelta(days=day - 1), datetime.time(),
                                      tzinfo=datetime.timezone.utc).isoformat()
    started = time.monotonic()
    cleared_at = time.time()
    for dag_id, task_id in ((daily, "hourly_weather"), (report, "joined")):
        stack.api("POST", f"dags/{dag_id}/clearTaskInstances",
                  {"dry_run": False, "task_ids": [task_id], "start_date": start, "include_downstream": True,
                   "include_future": True, "only_failed": False, "reset_dag_runs": True})
    for dag_id in dags:
        stack.unpause(dag_id)

    def rerun(dag_id: str) -> dict[str, int]:
        return {str(task): int(n) for task, n in stack.query(  # type: ignore[call-overload]
            "SELECT task_id, count(*) FROM task_instance WHERE dag_id = %s AND state = 'success' AND "
            "extract(epoch FROM end_date) > %s GROUP BY task_id", dag_id, cleared_at)}

    def done() -> bool | str:
        failed = stack.query("SELECT run_id FROM dag_run WHERE dag_id = ANY(%s) AND state = 'failed'", list(dags))
        if failed:
            raise RuntimeError(f"Airflow's reruns failed: {failed}")
        pending = stack.query("SELECT count(*) FROM dag_run WHERE dag_id = ANY(%s) AND state <> 'success'",
                              list(dags))[0][0]
        ran, reported = rerun(daily), rerun(report)
        want = days - day + 1
        return True if not pending and ran.get("join", 0) >= want and reported.get("report", 0) >= want else \
            f"{pending} runs pending, re-ran {ran}, {reported}"

    try:
        _wait("Airflow's correction", done, timeout)
    finally:
        for dag_id in dags:
            stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    ran, reported = rerun(daily), rerun(report)
    return Correction("airflow", spark_jobs=sum(ran.values()), reports=reported.get("report", 0),
                      detail=f"tasks re-run {ran} (clear hourly_weather from day {day}, downstream and future)",
                      seconds=time.monotonic() - started)


def correct_dagster(deployment: Any, first: datetime.date, day: int, days: int, timeout: float) -> Correction:
    start = (first + datetime.timedelta(days=day - 1)).isoformat()
    last = (first + datetime.timedelta(days=days - 1)).isoformat()
    started = time.monotonic()
    result = deployment.backfill(days, timeout=timeout, subset={"weather": (start, start), "daily": (start, last),
                                                                "report": (start, last)})
    if result["status"] != "COMPLETED_SUCCESS":
        raise RuntimeError(f"Dagster's correction backfill ended {result['status']}\n{deployment.log_tail()}")
    steps: dict[str, int] = {}
    for run in result["runs"]:
        for event in run["events"]:
            if event["kind"] == "STEP_SUCCESS":
                steps[event["step"]] = steps.get(event["step"], 0) + 1
    return Correction("dagster", spark_jobs=sum(n for s, n in steps.items() if s != "report"),
                      reports=steps.get("report", 0), detail=f"steps re-run {steps} (backfill of weather "
                      f"{start}, daily and report {start}..{last})", seconds=time.monotonic() - started)
