"""The ``mainjob`` group's second correctness scenario (issue 50): two deployments enabled at once on the
same days, each side's own way of having two.

- ours: two Airflow deployments (each its own PostgreSQL, API server, scheduler, triggerer and DAG
  processor, ``AIRFLOW_EPOCHS_DEPLOYMENT`` ``deployment-a`` and ``deployment-b``) on the one ZooKeeper and
  the same storage, both with ``nycflights_daily`` and ``nycflights_report`` unpaused at once;
- Airflow alone: the same two deployments with ``mainjob_airflow_daily`` and ``mainjob_airflow_report``
  unpaused at once, writing the same folders (two copies of one DAG: nothing tells them apart);
- Dagster: two instances (each its own database and daemon) backfilling the same days into the same
  folders at once.

Rows (``mainjob_two_*[side]``, bench/mainjob_rows.py's ``fault_rows``): days exact, duplicate outputs (a
day's figures produced twice, reports run twice, or a day's visible output holding files of two writes)
and missing days, across both deployments.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from mainjob_rows import Side

OWNERS = ("deployment-a", "deployment-b")


def _wait(what: str, done: Any, timeout: float, say: Any) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while True:
        state = done()
        if state is True:
            return
        if state != last:
            say(f"  {what}: {state}")
            last = state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still {state} after {timeout:.0f} s")
        time.sleep(2)


def _successes(stacks: list[Any], sql: str, dag_id: str, key: Any) -> dict[int, int]:
    """Per day, the rows ``sql`` counts in each stack, added up."""
    out: dict[int, int] = {}
    for stack in stacks:
        for value, n in stack.query(sql, dag_id):
            if value is not None:
                day = key(value)
                out[day] = out.get(day, 0) + int(n)
    return out


def run_two_ours(stacks: list[Any], zk: Any, days: int, timeout: float, epoch_of: Any, say: Any) -> Side:
    from airflow_epochs.coordination import EpochLedger, PipelineNotFound

    side = Side("ours", days)
    ledger = EpochLedger(zk, "nycflights", owner="bench-two")
    for stack in stacks:
        for dag_id in ("nycflights_daily", "nycflights_report"):
            stack.unpause(dag_id)

    def reports() -> dict[int, int]:
        return _successes(stacks, "SELECT partition_key, count(*) FROM dag_run WHERE dag_id = %s AND state = "
                          "'success' GROUP BY partition_key", "nycflights_report", lambda v: int(str(v)))

    def done() -> bool | str:
        try:
            frontier = int(ledger.frontier())
        except PipelineNotFound:
            frontier = 0
        found = reports()
        return True if frontier >= days and all(found.get(d) for d in range(1, days + 1)) else \
            f"frontier {frontier}/{days}, days reported {len(found)}/{days}"

    try:
        _wait("ours, two deployments", done, timeout, say)
        time.sleep(10)  # a second report of a day, if any, has its time to appear
    finally:
        for stack in stacks:
            for dag_id in ("nycflights_daily", "nycflights_report"):
                stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    sealers: dict[str, int] = {}
    for event in ledger.history():
        epoch = event.detail.get("epoch")
        if event.event == "epoch_sealed" and isinstance(epoch, int):
            side.completions[epoch] = min(event.at, side.completions.get(epoch, event.at))
            owner = str(event.detail.get("owner", "?"))
            sealers[owner] = sealers.get(owner, 0) + 1
        if event.event == "partition_sealed" and event.detail.get("partition") == "daily" and isinstance(epoch, int):
            side.outputs[epoch] = side.outputs.get(epoch, 0) + 1
    side.reports = reports()
    skipped = _successes(stacks, "SELECT r.logical_date, count(*) FROM task_instance ti JOIN dag_run r ON "
                         "r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND ti.state = "
                         "'skipped' AND ti.task_id LIKE '%%open' GROUP BY r.logical_date", "nycflights_daily", epoch_of)
    side.fault = (f"two deployments at once; epochs sealed by {sealers or 'none'}; openings skipped as already "
                  f"sealed by the other, per day {dict(sorted(skipped.items()))}")
    return side


def run_two_airflow(stacks: list[Any], days: int, timeout: float, epoch_of: Any, say: Any,
                    dags: tuple[str, str]) -> Side:
    side = Side("airflow", days)
    for stack in stacks:
        for dag_id in dags:
            stack.unpause(dag_id)

    def runs(dag_id: str) -> dict[int, int]:
        return _successes(stacks, "SELECT logical_date, count(*) FROM dag_run WHERE dag_id = %s AND state = "
                          "'success' GROUP BY logical_date", dag_id, epoch_of)

    def ended(stack: Any, dag_id: str) -> dict[int, str]:
        return {epoch_of(logical): str(state) for logical, state in stack.query(
            "SELECT logical_date, state FROM dag_run WHERE dag_id = %s AND state IN ('success', 'failed')", dag_id)}

    def done() -> bool | str:
        # each deployment: every day's run ended, and the report of every day whose run succeeded ended too
        # (a report waits for its own deployment's join: a failed day's report would wait for ever)
        # (depends_on_past: after a failed day no later day of that deployment ever runs; it is over too)
        states = [(ended(stack, dags[0]), ended(stack, dags[1])) for stack in stacks]

        def over(daily: dict[int, str], report: dict[int, str], day: int) -> bool:
            if any(daily.get(d) == "failed" for d in range(1, day)):
                return True
            return day in daily and (daily[day] != "success" or day in report)

        full = all(over(daily, report, day) for daily, report in states for day in range(1, days + 1))
        return True if full else f"day runs ended {[d for d, _ in states]}, reports ended {[r for _, r in states]}"

    try:
        _wait("airflow, two deployments", done, timeout, say)
    finally:
        for stack in stacks:
            for dag_id in dags:
                stack.api("PATCH", f"dags/{dag_id}", {"is_paused": True})
    side.outputs = _successes(stacks, "SELECT r.logical_date, count(*) FROM task_instance ti JOIN dag_run r ON "
                              "r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND ti.task_id = "
                              "'join' AND ti.state = 'success' GROUP BY r.logical_date", dags[0], epoch_of)
    side.reports = runs(dags[1])
    side.completions = dict.fromkeys(side.outputs, 0.0)
    failed = {i: [epoch_of(v) for (v,) in stack.query("SELECT logical_date FROM dag_run WHERE dag_id = %s AND "
                                                      "state = 'failed'", dags[0])] for i, stack in enumerate(stacks)}
    side.fault = ("two deployments at once, each running every day (nothing tells two copies of a DAG apart); "
                  f"failed day runs per deployment {failed}")
    return side


def run_two_dagster(stack: Any, base: Path, python: Path, env: dict[str, str], days: int, timeout: float,
                    absorb: Any, say: Any, live: dict[str, Any]) -> Side:
    """Two Dagster instances backfilling the same days at once; their records absorbed into one side."""
    from mainjob_dagster import DagsterDeployment, create_database

    side = Side("dagster", days)
    deployments = []
    for owner in OWNERS:
        deployment = DagsterDeployment(base / f"dagster-{owner}", python=python, env={
            **env, "DAGSTER_PG_URL": create_database(stack, owner.replace("-", "_"))})
        live[f"dagster-{owner}"] = deployment
        deployment.start()
        deployments.append(deployment)
    results: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def backfill(owner: str, deployment: Any) -> None:
        try:
            results[owner] = deployment.backfill(days, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the rows say it
            errors[owner] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=backfill, args=(owner, d)) for owner, d in zip(OWNERS, deployments,
                                                                                       strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 600)
    for result in results.values():
        absorb(side, result)
    statuses = {owner: result["status"] for owner, result in results.items()}
    side.fault = f"two instances at once; backfills {statuses}" + (f"; errors {errors}" if errors else "")
    say(f"  dagster, two instances: {side.fault}")
    return side
