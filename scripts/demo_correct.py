"""``demo.sh --correct DAY``: a corrected feed of a sealed day, after the run.

The corrected feed (``flights`` or ``weather``, see ``nycflights.data.CORRECTIONS``) lands in place of
the first delivery; one real DAG run of ``nycflights_correct`` re-seals that day's partition as a new
version and re-produces, with the pipeline's own Spark jobs, exactly the seals that read the old one;
the report DAG runs once per re-sealed ``daily`` key, each key one of the correction run's asset events (what
schedules the report again by itself under a scheduler; ``dag.test()`` has none, so the demo runs it for
each of them). What this prints is read back from ZooKeeper:
which seals got a new version, and (from the history since the correction began) that nothing else
ran: no epoch opened, no attempt started, no seal or version sealed other than the planned ones.
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORRECT_DAG = "nycflights_correct"
PARTITIONS = ("flights", "weather", "daily")
# History events that mean something ran or was sealed outside the correction's own versions.
OUTSIDE = ("epoch_opened", "attempt_started", "partition_sealed", "epoch_sealed", "rolled_back")


def parse_day(text: str) -> int:
    """``--correct``'s value: a day of 2013 (``2013-01-08``) or its epoch (``8``), as the epoch."""
    from nycflights.data import day_of_epoch, epoch_of_day

    text = text.strip()
    if text.isdigit():
        epoch = int(text)
        day_of_epoch(epoch)  # in range, or ValueError naming it
        return epoch
    try:
        day = datetime.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--correct takes a day of 2013 (2013-01-08) or its epoch (8), not {text!r}") from None
    epoch = epoch_of_day(day)
    day_of_epoch(epoch)
    return epoch


@dataclass
class CorrectionResult:
    """What a correction changed, read back from ZooKeeper."""

    epoch: int
    feed: str
    changed_rows: int
    resealed: dict[tuple[int, str], int] = field(default_factory=dict)   # (epoch, partition) -> newest version
    expected: set[tuple[int, str]] = field(default_factory=set)
    outside: list[str] = field(default_factory=list)                     # history events outside the plan
    version_seals: Counter[tuple[int, str]] = field(default_factory=Counter)
    reports: list[int] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return (set(self.resealed) == self.expected and not self.outside
                and all(n == 1 for n in self.version_seals.values()) and set(self.version_seals) == self.expected)

    def lines(self) -> list[str]:
        daily = sorted(e for e, p in self.resealed if p == "daily")
        span = f"{daily[0]}..{daily[-1]}" if daily else "none"
        out = [f"correction: new versions: {self.feed}@{self.epoch} v{self.resealed.get((self.epoch, self.feed), 1)}, "
               f"daily@{span} ({len(self.resealed)} seals; "
               + ", ".join(f"{p}@{e} v{v}" for (e, p), v in sorted(self.resealed.items())) + ")"]
        if self.exact:
            last = max(e for e, _ in self.expected)
            out.append(f"correction: nothing else re-ran: every other seal of epochs 1..{last} "
                       "is still version 1, no epoch opened, no attempt started, each new version sealed once")
        else:
            missing = sorted(self.expected - set(self.resealed))
            extra = sorted(set(self.resealed) - self.expected)
            twice = sorted(k for k, n in self.version_seals.items() if n != 1)
            out.append(f"correction: NOT exact: missing {missing}, extra {extra}, sealed other than once {twice}, "
                       f"events outside the correction {self.outside}")
        out.append(f"correction: report DAG ran once per re-sealed daily key: epochs {self.reports}")
        return out


def newest_versions(ledger: Any, days: int) -> dict[tuple[int, str], int]:
    found = {}
    for epoch in range(1, days + 1):
        for partition in PARTITIONS:
            view = ledger.corrections.sealed_version(epoch, partition)
            if view is not None:
                found[(epoch, partition)] = view.version
    return found


def correct(*, ledger: Any, bag: Any, raw: Path, epoch: int, feed: str, days: int, say: Any) -> CorrectionResult:
    """Land the corrected feed, run ``nycflights_correct`` and the reports; read back what changed."""
    from nycflights.data import CORRECTIONS, correct_day, day_of_epoch

    day = day_of_epoch(epoch)
    days = max(days, ledger.frontier())  # an earlier run may have sealed more days: they read it too
    changed = correct_day(raw, feed, day)
    say(f"correction: the corrected {feed} feed of {day} (epoch {epoch}) landed: {CORRECTIONS[feed]} "
        f"({changed} rows differ from what was landed)")
    before = newest_versions(ledger, days)
    seen = max((e.seq for e in ledger.history()), default=-1)
    say(f"correction: {CORRECT_DAG}: reseal {feed}@{epoch} -> reproduce (Spark: the same jobs, under the new "
        "versions) -> publish")
    run = bag.get_dag(CORRECT_DAG).test(run_conf={"epoch": epoch, "feed": feed,
                                                  "reason": f"corrected {feed} feed of {day}"})
    if "success" not in str(run.state):
        raise RuntimeError(f"{CORRECT_DAG} ended {run.state}")
    after = newest_versions(ledger, days)
    result = CorrectionResult(epoch, feed, changed)
    result.resealed = {key: version for key, version in after.items() if version != before.get(key)}
    result.expected = {(epoch, feed)} | {(e, "daily") for e in range(epoch, days + 1)}
    for event in ledger.history(since_seq=seen):
        where = (event.detail.get("epoch"), event.detail.get("partition"))
        if event.event in OUTSIDE:
            result.outside.append(f"{event.event} {where}")
        elif event.event == "version_sealed":
            result.version_seals[where] += 1
    report_dag = bag.get_dag("nycflights_report")
    for key in announced(run.run_id, "daily"):
        report = report_dag.test(run_conf={"epoch": key})
        if "success" not in str(report.state):
            raise RuntimeError(f"nycflights_report of epoch {key} ended {report.state}")
        result.reports.append(key)
    return result


def announced(run_id: str, partition: str) -> list[int]:
    """The epochs the correction run emitted an asset event of ``partition`` for (its partition keys)."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(AssetEvent).filter(AssetEvent.source_dag_id == CORRECT_DAG,
                                                AssetEvent.source_run_id == run_id).all()
        return sorted(int(row.partition_key) for row in rows
                      if row.partition_key and (row.extra or {}).get("partition") == partition)
