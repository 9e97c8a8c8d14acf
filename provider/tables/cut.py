"""Several published tables read at one epoch as one consistent cut.

At an aligned epoch N (every partition of each pipeline involved sealed at N, and the seals' lineage
vectors agree: no member was built on an upstream epoch another member does not hold), the tables'
snapshots of N show exactly what the seals say, so reading them together is one consistent cut. Anything
else is refused before any data is read: an epoch not sealed everywhere, a table whose snapshot of N is
not the current seal (its publish is pending, or a rollback is not mirrored yet), a table that shows an
epoch through N at an older version than the newest sealed one (a re-seal not published yet), or a lineage
violation. Each table is read as of N: epochs first..N at their newest versions, no later epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.recipes.lineage import LineageItem, check_consistency
from airflow_epochs.tables import history as h
from airflow_epochs.tables.read import snapshot_as_of, table_as_of_epoch
from airflow_epochs.tables.seal_files import check_identifier, still_sealed

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]


class NotAlignedCut(EpochsError):
    """The tables cannot be read as one consistent cut at that epoch (the message says why); nothing was read."""


@dataclass(frozen=True)
class CutMember:
    """One table of a cut: which sealed partition it shows, and the snapshot read."""

    table: str
    pipeline: str
    partition: str
    snapshot_id: int
    attempt: int
    generation: int
    request: str
    record: h.PublishedSnapshot = field(repr=False, compare=False)


@dataclass(frozen=True)
class SealedCut:
    """The tables at one aligned epoch: ``rows[table]`` is the table as of that epoch."""

    epoch: int
    members: tuple[CutMember, ...]
    rows: Mapping[str, pa.Table] = field(repr=False)


def plan_sealed_cut(ledgers: Callable[[str], EpochLedger], catalog: Any, tables: Sequence[str],
                    as_of_epoch: int) -> tuple[CutMember, ...]:
    """Check that ``tables`` at ``as_of_epoch`` form one consistent cut; the snapshot of each to read.

    :param ledgers: a pipeline's ledger (called once for each pipeline the tables were published from).

    :raises NotAlignedCut: the epoch is not sealed in every pipeline involved, a table's snapshot of it
        is not the current seal, or the seals' lineage is not a consistent cut.
    :raises EpochNotPublished: a table has no live snapshot of that epoch.
    """
    validate_epoch(as_of_epoch)
    if not tables:
        raise InvalidInput("a cut needs at least one table")
    if len(set(tables)) != len(tables):
        raise InvalidInput(f"a table is named twice in {list(tables)}")
    for identifier in tables:
        check_identifier(identifier)
    loaded = {identifier: catalog.load_table(identifier) for identifier in tables}
    found: dict[str, EpochLedger] = {}
    members = []
    for identifier, table in loaded.items():
        pipeline, partition = table.properties.get(h.PIPELINE), table.properties.get(h.PARTITION)
        if not pipeline or not partition:
            raise InvalidInput(f"table {identifier} is not a published partition (no {h.PIPELINE} / {h.PARTITION})")
        if pipeline not in found:
            found[pipeline] = ledgers(pipeline)
        record = h.snapshot_of_epoch(table, as_of_epoch)
        # Not the publish of the epoch itself: an earlier epoch re-sealed after it changed what it shows.
        members.append(CutMember(identifier, pipeline, partition, snapshot_as_of(table, as_of_epoch), record.attempt,
                                 record.generation, record.request, record))
    for pipeline, ledger in sorted(found.items()):
        info = ledger.epoch_info(as_of_epoch)
        if info is None or (info.state != "sealed" and info.attempt_state != "compacted"):
            unsealed = [] if info is None else sorted(set(ledger.config_for(as_of_epoch).config.partitions)
                                                      - set(info.sealed_partitions))
            raise NotAlignedCut(f"epoch {as_of_epoch} is not aligned: pipeline {pipeline!r} has not sealed it "
                                f"({'no such epoch' if info is None else f'state {info.state}; unsealed {unsealed}'})")
    items: list[LineageItem] = []
    for member in members:
        ledger = found[member.pipeline]
        if not still_sealed(ledger, member.partition, member.record):
            raise NotAlignedCut(_not_current(ledger, member, as_of_epoch))
        behind = _behind_versions(ledger, loaded[member.table], member, as_of_epoch)
        if behind:
            raise NotAlignedCut(behind)
        item = ledger.lineage(as_of_epoch, member.partition)
        if item is not None:
            items.append(item)
    report = check_consistency(items)
    if not report.consistent:
        raise NotAlignedCut(f"epoch {as_of_epoch} is not aligned: " + "; ".join(report.violations))
    return tuple(members)


def _not_current(ledger: EpochLedger, member: CutMember, epoch: int) -> str:
    """Why ``member``'s snapshot of ``epoch`` is not the current seal (for the refusal)."""
    shown = (f"table {member.table}: its snapshot {member.snapshot_id} of epoch {epoch} is attempt {member.attempt} "
             f"(generation {member.generation})")
    seal = ledger.seal_record(epoch, member.partition)
    if seal is None:
        return (f"{shown}, but partition {member.partition!r} of pipeline {member.pipeline!r} has no seal at epoch "
                f"{epoch} now; it is not part of a cut there")
    return (f"{shown}, but the current seal is attempt {seal.attempt} (generation {seal.generation}); "
            f"publish it again first")


def _behind_versions(ledger: EpochLedger, table: Any, member: CutMember, epoch: int) -> str:
    """Why the table shows an epoch through ``epoch`` at an older version than the newest sealed one (a
    re-seal not published yet), or "". Only the epochs a correction re-sealed can differ: they are read
    from the corrections, not epoch by epoch."""
    live = h.live_epochs(table, member.snapshot_id)
    touched = sorted({e for node in ledger.corrections.list()
                      for e, p in (node.origin[:2], *node.plan) if p == member.partition and e <= epoch and e in live})
    for e in touched:
        newest = ledger.corrections.sealed_version(e, member.partition)
        if newest is not None and newest.version != live[e].version:
            return (f"table {member.table}: epoch {e} is published as version {live[e].version}, but the newest "
                    f"sealed version of {member.partition!r} there is {newest.version}; publish it again first")
    return ""


def read_sealed_cut(ledgers: Callable[[str], EpochLedger], catalog: Any, tables: Sequence[str],
                    as_of_epoch: int) -> SealedCut:
    """Read ``tables`` (Iceberg identifiers of published partitions, of one pipeline or several) as of
    ``as_of_epoch`` as one consistent cut (see :func:`plan_sealed_cut` for what is refused).

    :param ledgers: a pipeline's ledger, where its seals are read: ``ZooKeeperHook(...).ledger`` in
        Airflow (the caller closes the hook).
    """
    members = plan_sealed_cut(ledgers, catalog, tables, as_of_epoch)
    rows = {m.table: table_as_of_epoch(catalog, m.table, as_of_epoch) for m in members}  # no later epoch's rows
    return SealedCut(as_of_epoch, members, rows)
