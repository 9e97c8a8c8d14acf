"""``airflow-epochs status``: what a pipeline looks like right now (frontier, leader, the epochs after
the frontier with each partition's votes and seal, barriers and their stragglers) as plain-text
tables, rendered from the same view model the Epochs page shows (:mod:`airflow_epochs.views.model`,
read by :class:`airflow_epochs.views.pipeline.PipelineState`)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.views.model import EpochDetail, Overview, PartitionDetail, VoteView
from airflow_epochs.views.pipeline import PipelineState

# Epochs after the frontier that one status shows at most, whatever the records say (a forged
# newest_epoch of 9,999,999,999 must not make the command read for ever).
MAX_OPEN_SHOWN = 100


@dataclass(frozen=True)
class PipelineStatus:
    """The pipeline's overview and the epochs the status shows."""

    overview: Overview
    epochs: tuple[EpochDetail, ...]
    not_shown: int = 0  # epochs after the frontier left out (more than MAX_OPEN_SHOWN)
    # (epoch, partition) -> its newest sealed version, for the shown seals re-sealed since (see reseal)
    versions: Mapping[tuple[int, str], int] = field(default_factory=dict)
    corrections: tuple[str, ...] = ()  # one line a correction not finished


def epoch_status(ledger: EpochLedger, epoch: int) -> EpochDetail | None:
    """One epoch's row, partitions (votes, seal, summed manifests) and barriers; None if never opened."""
    return PipelineState(ledger).epoch_detail(epoch, history=False)


def pipeline_status(ledger: EpochLedger, *, recent: int = 1) -> PipelineStatus:
    """The frontier, the leader, every epoch after the frontier, and the last ``recent`` sealed ones."""
    state = PipelineState(ledger)
    overview = state.overview()
    frontier, newest = overview.frontier, overview.newest_epoch
    last = min(max(frontier, newest), frontier + MAX_OPEN_SHOWN)
    epochs = []
    for epoch in range(max(1, frontier - recent + 1), last + 1):
        detail = state.epoch_detail(epoch, history=False)
        if detail is not None:
            epochs.append(detail)
    versions = {(e.row.epoch, p.partition): newest_version(ledger, e.row.epoch, p.partition)
                for e in epochs for p in e.partitions if p.sealed_by is not None}
    return PipelineStatus(overview, tuple(epochs), max(0, newest - last),
                          {key: v for key, v in versions.items() if v > 1}, correction_lines(ledger))


def newest_version(ledger: EpochLedger, epoch: int, partition: str) -> int:
    """The newest sealed version of a sealed (epoch, partition): 1 unless it was re-sealed."""
    view = ledger.corrections.sealed_version(epoch, partition)
    return 1 if view is None else view.version


def correction_lines(ledger: EpochLedger) -> tuple[str, ...]:
    """Each unfinished correction: what it corrects, how many stale seals it re-produces, what it waits for."""
    waiting = {item.correction: item for item in ledger.corrections.pending()}
    out = []
    for node in ledger.corrections.list():
        if node.state in ("done", "rolled_back"):
            continue
        epoch, partition, version = node.origin
        now = waiting.get(node.id)
        wait = f"; waiting for {now.partition} at epoch {now.epoch} v{now.version}" if now is not None else ""
        out.append(f"{partition} at epoch {epoch} v{version}: {node.state}, {len(node.plan)} stale seal(s){wait}")
    return tuple(out)


def _vote(vote: VoteView) -> str:
    if not vote.voted:
        return f"{vote.producer}:-"
    return f"{vote.producer}@{vote.attempt}" if vote.current else f"{vote.producer}~{vote.attempt}"


def _leader(overview: Overview) -> str:
    if not overview.leader:
        return "none"
    until = overview.leader_until
    if until is None:
        return overview.leader
    shown = datetime.datetime.fromisoformat(until).astimezone(datetime.timezone.utc)
    return f"{overview.leader} (lease until {shown:%Y-%m-%d %H:%M:%S} UTC)"


def render(status: PipelineStatus) -> str:
    """The status as plain-text tables (a vote of a superseded attempt shows as ``producer~attempt``)."""
    overview = status.overview
    lines = [f"pipeline {overview.pipeline}: frontier {overview.frontier}; leader {_leader(overview)}", ""]
    header = (f"{'epoch':>6}  {'state':<11} {'attempt':>7}  {'owner':<16} {'partition':<12} {'votes':<34} "
              f"{'sealed':<8} {'rows':>8}")
    lines += [header, "-" * len(header)]
    for epoch in status.epochs:
        row = epoch.row
        for p in epoch.partitions:
            votes = ", ".join(_vote(v) for v in p.producers)
            rows = p.summary.get("rows", "-")
            version = status.versions.get((row.epoch, p.partition))
            sealed = ("yes" if version is None else f"yes v{version}") if p.sealed_by is not None else "no"
            lines.append(f"{row.epoch:>6}  {row.state:<11} {row.attempt:>7}  {row.owner[:16]:<16} "
                         f"{p.partition[:12]:<12} {votes[:34]:<34} {sealed:<8} {rows:>8}")
    barrier_lines = [f"{e.row.epoch:>6}  {b.name:<14} {b.decision or 'waiting':<9} arrived {len(b.arrived)}/"
                     f"{len(b.registered)}  stragglers: {', '.join(b.stragglers) or 'none'}"
                     f"{f' and {b.unnamed} more' if b.unnamed else ''}"
                     for e in status.epochs for b in e.barriers]
    if status.not_shown:
        lines += ["", f"... and {status.not_shown} more epoch(s) up to the newest opened, {overview.newest_epoch} "
                  f"(only the first {MAX_OPEN_SHOWN} after the frontier are shown)"]
    if barrier_lines:
        lines += ["", f"{'epoch':>6}  {'barrier':<14} {'decision':<9} participants", *barrier_lines]
    deadline_lines = [_deadline_line(e.row.epoch, p) for e in status.epochs for p in e.partitions
                      if p.deadline is not None and (p.deadline["deadline_at"] is not None or p.state != "sealed")]
    if deadline_lines:
        lines += ["", f"{'epoch':>6}  {'partition':<12} {'predicted seal (typical / late)':<36} {'deadline':<12} "
                  "standing", *deadline_lines]
    if status.corrections:
        lines += ["", "corrections (re-seals) in progress:", *(f"  {line}" for line in status.corrections)]
    return "\n".join(lines)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc):%H:%M:%S}"


def _deadline_line(epoch: int, p: PartitionDetail) -> str:
    """One partition's prediction and deadline: ``LATE`` past it (naming the producers still missing)."""
    d = p.deadline or {}
    if d["status"] == "too_little_history":
        predicted = "too little history"
    elif d["status"] == "predicted":
        predicted = f"{_clock(d['typical_at'])} / {_clock(d['late_at'])} (q{d['quantile']:g})"
    else:
        predicted = d["status"]
    standing = {"late": "LATE", "sealed_late": "SEALED LATE", "in_time": "in time", "waiting": "on time so far",
                "no_deadline": "no deadline", "not_open": "not open"}.get(d["state"], d["state"])
    if d["state"] == "late" and d["missing"]:
        standing += " waiting for " + ", ".join(m["producer"] for m in d["missing"])
    if d.get("late_by") is not None:
        standing += f" by {d['late_by']:.1f} s"
    if d["alerted"]:
        standing += " (alerted)"
    return f"{epoch:>6}  {p.partition[:12]:<12} {predicted:<36} {_clock(d['deadline_at']):<12} {standing}"
