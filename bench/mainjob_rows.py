"""The ``mainjob`` group's arithmetic (bench/mainjob.py): what a side's catch-up gave, and its rows.

Pure: no server, no clock; tests/unit/test_bench_mainjob_rows.py checks it on made-up timelines."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from common import compare, figure

GROUP = "mainjob"
PEER_LABELS = {"airflow": "Airflow alone (depends_on_past, max_active_runs=1, ExternalTaskSensor)",
               "dagster": "Dagster 1.13 (daily partitions, asset backfill, daemon)"}


@dataclass
class Side:
    """What one side's catch-up of the days gave."""

    name: str
    days: int
    seconds: float = 0.0
    completions: dict[int, float] = field(default_factory=dict)  # day -> wall clock its output was complete
    downstream: dict[int, float] = field(default_factory=dict)  # day -> its report work started
    # day -> (start, end, kind) of each task or step of the day (kind: spark, task or deferred; spark_task())
    spans: dict[int, list[tuple[float, float, str]]] = field(default_factory=dict)
    outputs: dict[int, int] = field(default_factory=dict)  # day -> outputs of its daily figures (1 each)
    reports: dict[int, int] = field(default_factory=dict)  # day -> successful report runs or steps
    hops: dict[str, float] = field(default_factory=dict)  # "<task> queued->start" / "start->end" -> median s
    zk_requests: int = 0
    peak_mb: float = 0.0
    cpu_s: float = 0.0  # CPU-seconds of the side's processes during its catch-up
    cpu_parts: dict[str, float] = field(default_factory=dict)  # process (tree) -> its CPU-seconds
    writes: dict[int, int] = field(default_factory=dict)  # day -> Spark writes whose files are in its output
    fault: str = ""  # the fault scenario's kill, in words
    exact: dict[int, bool] = field(default_factory=dict)
    check: str = ""

    def intervals(self) -> dict[int, float]:
        return {e: self.completions[e] - self.completions[e - 1] for e in self.completions
                if e - 1 in self.completions}

    def path(self) -> dict[str, list[float]]:
        """Each catch-up interval split into Spark, coordination and orchestration (see the module docstring)."""
        parts: dict[str, list[float]] = {"spark": [], "coordination": [], "orchestration": []}
        for day in sorted(self.intervals()):
            split = split_interval(self.completions[day - 1], self.completions[day], self.spans.get(day, []))
            for key, value in split.items():
                parts[key].append(value)
        return parts

    def seal_to_downstream(self) -> list[float]:
        return [self.downstream[e] - self.completions[e] for e in sorted(self.downstream) if e in self.completions]

    def duplicates(self) -> int:
        """Outputs beyond one per day: daily figures or reports recorded twice, or a day's visible output
        holding the files of more than one Spark write."""
        return (sum(n - 1 for n in self.outputs.values() if n > 1) + sum(n - 1 for n in self.reports.values() if n > 1)
                + sum(n - 1 for n in self.writes.values() if n > 1))

    def missing(self) -> list[int]:
        return [d for d in range(1, self.days + 1) if not self.outputs.get(d) or not self.reports.get(d)]


def spark_task(start: float, end: float, spark: float) -> list[tuple[float, float, str]]:
    """A task that ran a Spark job of ``spark`` seconds (its manifest's), as two spans: its own work (start-up,
    session, coordination) first, then the job, which ends with the task (a job longer than its task is cut)."""
    job_start = max(start, end - spark)
    return [(start, job_start, "task"), (job_start, end, "spark")]


def split_interval(start: float, end: float, spans: list[tuple[float, float, str]]) -> dict[str, float]:
    """``(start, end]`` split by what ran: a Spark job (``spark``), else a task's own work (``coordination``),
    else a deferred wait or nothing at all (``orchestration``); parallel spans count once."""
    points = sorted({start, end, *(max(start, min(end, t)) for s, e, _ in spans for t in (s, e))})
    covered = {"spark": 0.0, "task": 0.0, "deferred": 0.0, "none": 0.0}
    for a, b in itertools.pairwise(points):
        middle = (a + b) / 2
        kinds = {kind for s, e, kind in spans if s <= middle < e}
        covered[next((k for k in ("spark", "task", "deferred") if k in kinds), "none")] += b - a
    return {"spark": covered["spark"], "coordination": covered["task"],
            "orchestration": covered["deferred"] + covered["none"]}


def order_tag(order: tuple[str, ...]) -> str:
    """The suffix of a row id for the sides' order: none when ours ran first (the default), ``@ours-last`` or
    ``@ours-second`` otherwise (a run in another order measures how much of a gap is the order)."""
    if not order or order[0] == "ours" or "ours" not in order:
        return ""
    return "@ours-last" if order[-1] == "ours" else "@ours-second"


def rows(sides: dict[str, Side], load: str, order: tuple[str, ...] = (), stages: str = "tasks") -> None:
    """The group's rows from the sides that finished (a comparison needs ours and that peer); ``order``: the
    order the sides ran in (see :func:`order_tag`); ``stages``: ours' epoch stages, whose ``inline`` form gets
    rows of its own (``@inline``), beside the default form's."""
    ours = sides.get("ours")
    tag = order_tag(order) + ("@inline" if stages == "inline" else "")
    for peer_name in ("airflow", "dagster"):
        peer = sides.get(peer_name)
        if peer is None or ours is None:
            continue
        name = peer_name + tag
        label = PEER_LABELS[peer_name]
        note = f"{ours.days} days each, same deployment, Spark Connect and jobs; {load}"
        compare(f"mainjob_catchup_epoch_s[{name}]", GROUP, "catch-up: seconds per day (output complete to the "
                "next day's), median after the first", list(ours.intervals().values()),
                list(peer.intervals().values()), "s", label,
                note=f"{note}; whole catch-up ours {ours.seconds:.0f} s, peer {peer.seconds:.0f} s",
                ours_tasks=ours.hops, peer_tasks=peer.hops)
        compare(f"mainjob_seal_to_downstream_s[{name}]", GROUP, "day complete -> its report work running, median",
                ours.seal_to_downstream(), peer.seal_to_downstream(), "s", label, note=note)
        ours_path, peer_path = ours.path(), peer.path()
        for part in ("spark", "coordination", "orchestration"):
            compare(f"mainjob_path_{part}_s[{name}]", GROUP, f"a day's critical path: {part}, median",
                    ours_path[part], peer_path[part], "s", label, note=note)
        compare(f"mainjob_cpu_s_per_epoch[{name}]", GROUP, "CPU-seconds per day of the side's processes "
                "(whole catch-up / days)", [ours.cpu_s / ours.days], [peer.cpu_s / peer.days], "s", label,
                note="ours with ZooKeeper; both with Airflow's or Dagster's processes, PostgreSQL and Spark Connect; "
                "less moved by the machine's other load than the seconds", ours_parts=ours.cpu_parts,
                peer_parts=peer.cpu_parts)
        if "tasks" in ours.cpu_parts and "tasks" in peer.cpu_parts:
            compare(f"mainjob_task_cpu_s_per_epoch[{name}]", GROUP, "CPU-seconds per day of the tasks (executor "
                    "workers and task processes; Spark's own work is the Connect server's)",
                    [ours.cpu_parts["tasks"] / ours.days], [peer.cpu_parts["tasks"] / peer.days], "s", label,
                    note="what the tasks themselves cost, the least moved by the run's length and the machine's load")
        compare(f"mainjob_peak_memory_mb[{name}]", GROUP, "peak memory of the side's processes (PSS)", [ours.peak_mb],
                [peer.peak_mb], "MB", label, note="ours with ZooKeeper; both with PostgreSQL and Spark Connect")
    for side in sides.values():
        exact = sum(1 for d in range(1, side.days + 1) if side.exact.get(d)) / side.days
        figure(f"mainjob_days_exact[{side.name}]", GROUP, f"{side.name}: days whose figures equal one Spark "
               "computation over all the days / days", exact, "ratio",
               note=f"{side.check}; duplicate outputs {side.duplicates()}, days missing {side.missing() or 'none'}; "
               f"report runs per day {dict(sorted(side.reports.items()))}")
    if ours is None:
        return
    figure("mainjob_zk_requests_per_epoch", GROUP, "ZooKeeper requests per day during ours' catch-up",
           ours.zk_requests / ours.days, "requests",
           note="server's received packets (pings included) / days; the peers' phases: "
           + ", ".join(f"{s.name} {s.zk_requests}" for s in sides.values() if s.name != "ours"))


SCENARIO_WORDS = {"kill": "kill -9 mid-job", "two": "two deployments at once"}


def fault_rows(sides: dict[str, Side], failures: dict[str, str], load: str, scenario: str = "kill") -> None:
    """A correctness scenario's rows, each side's own: days exact, duplicate outputs and missing days after the
    process of a day's ``daily`` job was killed -9 mid-job (``kill``), or with two deployments enabled at once
    on the same days (``two``); a side that failed says so in its rows."""
    words = SCENARIO_WORDS[scenario]
    for name, side in sides.items():
        exact = sum(1 for d in range(1, side.days + 1) if side.exact.get(d)) / side.days
        note = f"{side.fault or 'no kill'}; {load}"
        figure(f"mainjob_{scenario}_days_exact[{name}]", GROUP, f"{name}, {words}: days whose figures equal one "
               "Spark computation over all the days / days", exact, "ratio", note=f"{side.check}; {note}")
        figure(f"mainjob_{scenario}_duplicate_outputs[{name}]", GROUP, f"{name}, {words}: duplicate outputs",
               side.duplicates(), "outputs", note=f"Spark writes per day's visible output {side.writes}; daily "
               f"outputs per day {dict(sorted(side.outputs.items()))}; reports per day "
               f"{dict(sorted(side.reports.items()))}")
        figure(f"mainjob_{scenario}_missing_days[{name}]", GROUP, f"{name}, {words}: days without output or report",
               len(side.missing()), "days", note=f"missing {side.missing() or 'none'}")
    for name, error in failures.items():
        if name not in sides:
            figure(f"mainjob_{scenario}_days_exact[{name}]", GROUP, f"{name}, {words}: days whose figures equal "
                   "one Spark computation over all the days / days", 0.0, "ratio", note=f"the side failed: {error}")


def correction_rows(sides: dict[str, Side], corrections: dict[str, Any], fixed: int) -> None:
    """The correction's rows: what each side re-ran (ours beside each peer) and the days exact afterwards."""
    ours = corrections.get("ours")
    for name in ("airflow", "dagster"):
        peer = corrections.get(name)
        if ours is None or peer is None:
            continue
        days = sides[name].days
        note = (f"weather of day {fixed} of {days} corrected; ours: {ours.detail}; peer: {peer.detail}; minimum: "
                f"{days - fixed + 2} jobs (the day's weather and the join of it and of every later day)")
        compare(f"mainjob_correction_spark_jobs[{name}]", GROUP, "correction: Spark jobs run again",
                [ours.spark_jobs], [peer.spark_jobs], "jobs", PEER_LABELS[name], note=note)
        compare(f"mainjob_correction_reports[{name}]", GROUP, "correction: reports run again",
                [ours.reports], [peer.reports], "runs", PEER_LABELS[name],
                note=f"minimum {days - fixed + 1} (the day's and every later day's)")
    for name, done in corrections.items():
        days = sides[name].days
        exact = sum(1 for d in range(1, days + 1) if done.exact.get(d)) / days
        figure(f"mainjob_correction_days_exact[{name}]", GROUP, f"{name}: after the correction, days whose figures "
               "equal one Spark computation over the corrected days / days", exact, "ratio",
               note=f"{done.check}; re-run in {done.seconds:.0f} s")
