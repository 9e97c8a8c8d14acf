"""Causal lineage: are these sealed outputs mutually consistent?

A seal may record the upstream frontiers its producers read (a vector, e.g. ``{"raw": 17}``). A set
of sealed outputs is a consistent cut when

- no member was built on an upstream epoch beyond what the set itself holds of that upstream
  (member B read pipeline A up to epoch 18, but the set's A output is epoch 17: B saw the future), and
- members that read the same upstream read the same epoch of it (otherwise combining them mixes two
  versions of the same input, the classic diamond anomaly).

A vector also names the partitions of the member's own pipeline it read (``read_key``, ``nyc:daily``:
the epoch read, such as the snapshot of the epoch before): those are not upstream pipelines. Within one
pipeline the seals themselves order the reads (epoch e seals after e-1, a partition after its same-epoch
inputs), so a running total that read ``daily`` at e-1 and a report that read ``daily`` at e are one
consistent cut at e; such keys are left out of both checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.protocol.retention import archived_lineage
from airflow_epochs.coordination.recipes.corrections.records import partition_read
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import seal_record


@dataclass(frozen=True)
class LineageItem:
    """One sealed output: where it comes from and what it was built on."""

    pipeline: str
    epoch: int
    partition: str
    upstream: Mapping[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.pipeline}/{self.partition}@{self.epoch}"


@dataclass(frozen=True)
class LineageReport:
    consistent: bool
    violations: tuple[str, ...]


def read_lineage(ctx: PipelineContext, epoch: int, partition: str) -> LineageItem | None:
    """The lineage of a sealed partition (None if it is not sealed, or compacted without a kept vector).

    One seal read; for a compacted epoch, the vector retention kept for the partition's newest
    compacted seal. The ledger binds it as :meth:`EpochLedger.lineage`.
    """
    validate_epoch(epoch)
    validate_name("partition", partition)

    def run(call: Call) -> LineageItem | None:
        seal = seal_record(call, ctx, epoch, partition)
        if seal is not None:
            return LineageItem(ctx.pipeline, epoch, partition, dict(seal.upstream))
        kept = archived_lineage(call, ctx, epoch, partition)
        return None if kept is None else LineageItem(ctx.pipeline, epoch, partition, kept)

    return ctx.call(run, what=f"read the lineage of {partition!r} at epoch {epoch}")


def check_consistency(items: Iterable[LineageItem]) -> LineageReport:
    """Whether ``items`` form a consistent cut; each violation is described in words."""
    members = list(items)
    held: dict[str, int] = {}
    for item in members:
        held[item.pipeline] = min(held.get(item.pipeline, item.epoch), item.epoch)
    violations: list[str] = []
    readers: dict[str, dict[int, list[str]]] = {}
    for item in members:
        for upstream, epoch in sorted(item.upstream.items()):
            if partition_read(item.pipeline, upstream) is not None:
                continue  # a partition of its own pipeline (see the module): ordered by the seals
            readers.setdefault(upstream, {}).setdefault(epoch, []).append(item.label)
            if upstream in held and epoch > held[upstream]:
                violations.append(
                    f"{item.label} was built on {upstream} epoch {epoch}, but the set holds {upstream} only "
                    f"up to epoch {held[upstream]}"
                )
    for upstream, by_epoch in sorted(readers.items()):
        if len(by_epoch) > 1:
            parts = "; ".join(f"epoch {e}: {', '.join(sorted(labels))}" for e, labels in sorted(by_epoch.items()))
            violations.append(f"members read different epochs of {upstream} ({parts})")
    return LineageReport(not violations, tuple(violations))
