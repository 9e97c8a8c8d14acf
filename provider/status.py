"""What a pipeline looks like right now, read from ZooKeeper: frontier, leader, open epochs, each
partition's votes and seal, barriers and their stragglers. Used by ``airflow-epochs status``."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination import EpochLedger, EpochNotOpen, LeaderLease
from airflow_epochs.coordination.barriers import Barrier, BarrierNotDeclared


@dataclass(frozen=True)
class PartitionStatus:
    partition: str
    producers: tuple[str, ...]
    votes: dict[str, int]  # producer -> attempt token of its vote
    sealed_by: int | None
    rows: int | None


@dataclass(frozen=True)
class BarrierStatus:
    name: str
    registered: tuple[str, ...]
    arrived: tuple[str, ...]
    late: tuple[str, ...]
    decision: str | None


@dataclass(frozen=True)
class EpochStatus:
    epoch: int
    state: str
    attempt: int
    owner: str
    config_version: int
    partitions: list[PartitionStatus] = field(default_factory=list)
    barriers: list[BarrierStatus] = field(default_factory=list)


# Epochs after the frontier that one status shows at most, whatever the records say (a forged
# newest_epoch of 9,999,999,999 must not make the command read for ever).
MAX_OPEN_SHOWN = 100


@dataclass(frozen=True)
class PipelineStatus:
    pipeline: str
    frontier: int
    leader: str | None
    leader_until: datetime.datetime | None
    epochs: list[EpochStatus]
    newest: int = 0
    not_shown: int = 0  # epochs after the frontier left out (more than MAX_OPEN_SHOWN)


def _rows(manifest: Any) -> int | None:
    outputs = manifest.get("outputs") if isinstance(manifest, dict) else None
    if isinstance(outputs, dict) and isinstance(outputs.get("data"), dict):
        return int(outputs["data"].get("rows", 0))
    if isinstance(manifest, dict) and str(manifest.get("rows", "")).isdigit():
        return int(manifest["rows"])
    return None


def epoch_status(ledger: EpochLedger, epoch: int) -> EpochStatus | None:
    info = ledger.epoch_info(epoch)
    if info is None:
        return None
    config = ledger.config_for(epoch).config
    partitions = []
    for name in info.partitions:
        producers = tuple(config.partitions.get(name, ()))
        votes = {}
        for producer in producers:
            vote = ledger.vote_of(epoch, name, producer)
            if vote is not None:
                votes[producer] = vote.attempt
        seal = ledger.seal(epoch, name)
        rows = None
        if seal is not None:
            counted = [_rows(m) for m in seal.manifests.values()]
            rows = sum(r for r in counted if r is not None) if any(r is not None for r in counted) else None
        partitions.append(PartitionStatus(name, producers, votes, seal.attempt if seal else None, rows))
    barriers = []
    for name in sorted(config.barriers):
        barrier = Barrier(ledger.client, ledger.pipeline, epoch, name, root=ledger.paths.root)
        try:
            state = barrier.status()
        except (BarrierNotDeclared, EpochNotOpen):  # not declared yet, or its epoch was rolled back
            barriers.append(BarrierStatus(name, tuple(config.barriers[name]), (), tuple(config.barriers[name]), None))
            continue
        outcome = barrier.outcome()
        barriers.append(BarrierStatus(name, tuple(state["registered"]), tuple(state["arrived"]), tuple(state["late"]),
                                      outcome.decision if outcome else None))
    return EpochStatus(epoch, info.state, info.attempt, info.owner, info.config_version, partitions, barriers)


def pipeline_status(ledger: EpochLedger, *, recent: int = 1) -> PipelineStatus:
    """The frontier, the leader, every epoch after the frontier, and the last ``recent`` sealed ones."""
    frontier = ledger.frontier()
    holder = LeaderLease(ledger.client, ledger.pipeline, owner="status-reader", root=ledger.paths.root).holder()
    newest = ledger.newest_epoch()
    last = min(max(frontier, newest), frontier + MAX_OPEN_SHOWN)
    epochs = []
    for epoch in range(max(1, frontier - recent + 1), last + 1):
        status = epoch_status(ledger, epoch)
        if status is not None:
            epochs.append(status)
    return PipelineStatus(ledger.pipeline, frontier, holder.owner if holder else None,
                          holder.until if holder else None, epochs, newest, max(0, newest - last))


def render(status: PipelineStatus) -> str:
    """The status as plain-text tables."""
    lines = [f"pipeline {status.pipeline}: frontier {status.frontier}; leader "
             + (f"{status.leader} (lease until {status.leader_until:%Y-%m-%d %H:%M:%S} UTC)" if status.leader
                else "none"), ""]
    header = (f"{'epoch':>6}  {'state':<11} {'attempt':>7}  {'owner':<16} {'partition':<12} {'votes':<34} "
              f"{'sealed':<8} {'rows':>8}")
    lines += [header, "-" * len(header)]
    for epoch in status.epochs:
        for p in epoch.partitions:
            votes = ", ".join(f"{name}@{token}" if name in p.votes else f"{name}:-" for name, token in
                              ((n, p.votes.get(n)) for n in p.producers))
            lines.append(f"{epoch.epoch:>6}  {epoch.state:<11} {epoch.attempt:>7}  {epoch.owner[:16]:<16} "
                         f"{p.partition[:12]:<12} {votes[:34]:<34} {'yes' if p.sealed_by is not None else 'no':<8} "
                         f"{p.rows if p.rows is not None else '-':>8}")
    barrier_lines = [f"{e.epoch:>6}  {b.name:<14} {b.decision or 'waiting':<9} arrived {len(b.arrived)}/"
                     f"{len(b.registered)}  stragglers: {', '.join(b.late) or 'none'}"
                     for e in status.epochs for b in e.barriers]
    if status.not_shown:
        lines += ["", f"... and {status.not_shown} more epoch(s) up to the newest opened, {status.newest} (only the "
                  f"first {MAX_OPEN_SHOWN} after the frontier are shown)"]
    if barrier_lines:
        lines += ["", f"{'epoch':>6}  {'barrier':<14} {'decision':<9} participants", *barrier_lines]
    return "\n".join(lines)
