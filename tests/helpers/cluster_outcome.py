"""What a run on the cluster found (:mod:`cluster_run`): its figures, its faults and their report."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Fault:
    name: str
    killed: str = ""  # the component killed
    at: float = 0.0  # wall clock of the kill
    detail: str = ""
    recovered_s: float | None = None  # the recovery's measure (see each fault)
    restarted: str = ""  # what a supervisor restarted
    # what the recovery is made of (label -> seconds, in order; they add up to ``recovered_s``)
    parts: dict[str, float] = field(default_factory=dict)
    awaited: bool = True  # False for a start (the second deployment): no recovery to measure
    failure: str = ""  # why the recovery was not seen (the wait's error), when it was not

    def recovery(self) -> str:
        """What became of the fault, in words: its recovery time, or why there is none."""
        if self.recovered_s is not None:
            return f"recovered after {self.recovered_s:.1f} s"
        if not self.awaited:
            return "a start, no recovery awaited"
        return f"did not recover: {self.failure}" if self.failure else "no recovery seen (the run ended first)"

    def made_of(self) -> str:
        """``recovered_s`` split into its parts, or "" when it has none."""
        return "; ".join(f"{label} {seconds:.1f} s" for label, seconds in self.parts.items())


def takeover_parts(stopped: float, lease_until: float, taken: float, sealed: float) -> dict[str, float]:
    """What a takeover's recovery (``sealed - stopped``, wall clock) is made of: the stopped leader's lease
    still running at the stop (a setting: the open task's ``lease_seconds`` less the time since its last
    renewal), the standby's wake-up after the lease ran out until it took the leadership, and the epoch
    carried to its seal under the new leader. A lease that had run out before the stop counts 0."""
    expiry = min(max(lease_until, stopped), taken)
    return {"lease left at the stop": expiry - stopped, "lease expiry to the leadership taken": taken - expiry,
            "leadership taken to the epoch sealed": sealed - taken}


def every_day_reported(report_runs: dict[int, int], days: int) -> bool:
    """Whether each of days 1..``days`` has a successful report run: what a run waits for. A total would
    stop early when one day ran twice (issue 36's takeover: day 2 twice, day 5 not counted yet, 5 of 5)."""
    return all(report_runs.get(day, 0) >= 1 for day in range(1, days + 1))


def days_reported_once(report_runs: dict[int, int], days: int) -> float:
    """Days 1..``days`` with exactly one successful report run / ``days`` (1.0 only when each day ran once:
    a day run twice and a day not run count against it, never average out as a total / days would)."""
    return sum(1 for day in range(1, days + 1) if report_runs.get(day, 0) == 1) / days if days else 0.0


def days_not_reported_once(report_runs: dict[int, int], days: int) -> dict[int, int]:
    """Each day with 0 or 2+ successful report runs -> its count (and any run of a day not run, as it is)."""
    off = {day: report_runs.get(day, 0) for day in range(1, days + 1) if report_runs.get(day, 0) != 1}
    off.update({day: n for day, n in report_runs.items() if not 1 <= day <= days})
    return dict(sorted(off.items()))


@dataclass
class Outcome:
    deployment: str
    days: int
    days_exact: float = 0.0
    duplicate_seals: int = 0
    missing_seals: int = 0
    report_runs: dict[int, int] = field(default_factory=dict)
    epoch_s: dict[int, float] = field(default_factory=dict)
    seal_to_downstream_s: dict[int, float] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    check: str = ""
    seconds: float = 0.0
    # the epoch jobs that went through spark-submit onto the standalone master: "name (state)" each
    spark_submit_jobs: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)  # the pictures drawn

    @property
    def report_runs_per_day(self) -> float:
        """Days with exactly one successful report run / days run (:func:`days_reported_once`)."""
        return days_reported_once(self.report_runs, self.days)

    @property
    def report_days_off(self) -> dict[int, int]:
        """The days with 0 or 2+ successful report runs -> their count (:func:`days_not_reported_once`)."""
        return days_not_reported_once(self.report_runs, self.days)

    @property
    def one_report_run_per_day(self) -> bool:
        return not self.report_days_off

    def p50(self, values: dict[int, float]) -> float | None:
        return statistics.median(values.values()) if values else None

    def markdown(self) -> str:
        lines = [f"# The main job on the cluster ({self.deployment}, {self.days} days)", "",
                 f"- check, row for row against one Spark computation: {self.check}",
                 f"- days exact: {self.days_exact:.2f}; duplicate seals: {self.duplicate_seals}; missing seals: "
                 f"{self.missing_seals}; days with exactly one report run: {self.report_runs_per_day:.2f} "
                 f"({dict(sorted(self.report_runs.items()))}; not once: {self.report_days_off or 'none'})",
                 f"- seconds per epoch (open to seal), p50: {_fmt(self.p50(self.epoch_s))}; each: "
                 f"{ {e: round(s, 1) for e, s in sorted(self.epoch_s.items())} }",
                 "- seal of `daily` to the report run's first task, p50: "
                 f"{_fmt(self.p50(self.seal_to_downstream_s))} s; each: "
                 f"{ {e: round(s, 1) for e, s in sorted(self.seal_to_downstream_s.items())} }",
                 f"- epoch jobs through spark-submit onto the standalone master: {len(self.spark_submit_jobs)} "
                 f"({', '.join(self.spark_submit_jobs) or 'none'}); the others through Spark Connect",
                 f"- timeline of the epochs' stages: {', '.join(self.timeline) or '-'}",
                 f"- whole run: {self.seconds:.0f} s", ""]
        return "\n".join(lines) + "\n" + faults_markdown(self.faults)


def faults_markdown(faults: list[Fault]) -> str:
    """The faults' table: each with its recovery and, where it has them, the recovery's parts."""
    if not faults:
        return ""
    lines = ["| fault | killed | detail | recovered after (s) | made of | restarted by the supervisor |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {f.name} | {f.killed} | {f.detail} | {_recovered(f)} | {f.made_of() or '-'} | "
              f"{f.restarted or '-'} |" for f in faults]
    return "\n".join(lines) + "\n"


def _recovered(fault: Fault) -> str:
    """The table's recovery cell: seconds, "-" for a start, or what kept it from recovering."""
    if fault.recovered_s is not None or not fault.awaited:
        return _fmt(fault.recovered_s)
    return fault.recovery()


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
