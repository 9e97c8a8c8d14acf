"""Whether a table we publish into is whole: each live epoch committed once and in epoch order, no data
file registered twice, and a name mapping that names every column (pyiceberg cannot scan the table
otherwise). A table broken by an earlier double commit (before publishes were serialized, or by
another writer) is reported with what to do, and a publish refuses to add to it
(:class:`TableBroken`, nothing written).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import EpochsError
from airflow_epochs.tables import history as h

NAME_MAPPING = "schema.name-mapping.default"  # pyiceberg's TableProperties.DEFAULT_NAME_MAPPING


class TableBroken(EpochsError):
    """The table holds an epoch twice, epochs out of order, a data file twice, or a name mapping without
    a column; the message says what is wrong and what to do. Nothing was written."""


@dataclass(frozen=True)
class TableProblem:
    """One thing wrong with a table, and the snapshot to make current again to undo it (if that does)."""

    what: str
    restore_to: int | None = None  # the newest snapshot before the damage
    remap: bool = False  # the name mapping must be set again from the schema


def _history_problems(table: Any) -> list[TableProblem]:
    """Replay our snapshots of the current ancestry, oldest first: a publish of an epoch that is live
    already is a double commit; one below the newest live epoch is out of order."""
    chain = list(reversed(list(h.ancestry(table))))
    live: dict[int, tuple[int, int]] = {}  # epoch -> (snapshot id, version)
    found = []
    for snapshot in chain:
        record = h.published(snapshot)
        if record is None:
            continue
        if record.action == h.ROLLBACK:
            live = {e: s for e, s in live.items() if e <= record.epoch}
            continue
        if record.action == h.RESEAL:  # replaces a live epoch's files: a newer version, once
            if record.epoch not in live or live[record.epoch][1] >= record.version:
                found.append(TableProblem(f"epoch {record.epoch} version {record.version} is re-sealed over "
                                          f"{'nothing' if record.epoch not in live else 'a version as new'} "
                                          f"(snapshot {record.snapshot_id})", snapshot.parent_snapshot_id))
            live[record.epoch] = (record.snapshot_id, record.version)
            continue
        if record.epoch in live:
            found.append(TableProblem(f"epoch {record.epoch} is committed twice (snapshots {live[record.epoch][0]} and "
                                      f"{record.snapshot_id})", snapshot.parent_snapshot_id))
        elif live and record.epoch < max(live):
            found.append(TableProblem(f"epoch {record.epoch} is committed after epoch {max(live)} (snapshot "
                                      f"{record.snapshot_id})", snapshot.parent_snapshot_id))
        live[record.epoch] = (record.snapshot_id, record.version)
    return found


def _mapping_problems(table: Any) -> list[TableProblem]:
    mapping = table.name_mapping()
    if mapping is None:
        return []
    mapped = {(name, f.field_id) for f in mapping for name in f.names}
    missing = [f.name for f in table.schema().fields if (f.name, f.field_id) not in mapped]
    if not missing:
        return []
    return [TableProblem(f"the name mapping ({NAME_MAPPING}) has no entry for column(s) {missing}", remap=True)]


def _file_problems(table: Any) -> list[TableProblem]:
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    seen: Counter[str] = Counter()
    added_by: dict[str, list[int]] = {}
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            path = str(entry.data_file.file_path)
            seen[path] += 1
            added_by.setdefault(path, []).append(int(entry.snapshot_id))
    twice = sorted(p for p, n in seen.items() if n > 1)
    if not twice:
        return []
    newest = max(max(added_by[p]) for p in twice)
    parent = table.snapshot_by_id(newest).parent_snapshot_id if table.snapshot_by_id(newest) else None
    return [TableProblem(f"{len(twice)} data file(s) are registered twice in the current snapshot (e.g. "
                         f"{twice[0]})", parent)]


def table_problems(table: Any, *, files: bool = False) -> list[TableProblem]:
    """What is wrong with ``table`` (empty: nothing). The history and name mapping are read from the
    table's metadata; ``files`` also reads the current snapshot's manifests (a data file twice)."""
    found = _history_problems(table) + _mapping_problems(table)
    return found + (_file_problems(table) if files else [])


def what_to_do(identifier: str, problems: list[TableProblem]) -> str:
    """The repair of ``problems``, in words and pyiceberg calls."""
    steps = []
    restore = [p.restore_to for p in problems if p.restore_to is not None]
    if restore:
        # the oldest damage decides (history problems come oldest first, the file check last): every
        # snapshot after it is redone by the next publish
        target = restore[0]
        steps.append(f"make snapshot {target} (the newest before the damage) current again: "
                     f"table.manage_snapshots().set_current_snapshot({target}).commit(); the next publish adds the "
                     f"epochs after it once each")
    if any(p.remap for p in problems):
        steps.append(f"set the name mapping from the schema again: with table.transaction() as t: t.set_properties("
                     f"{{'{NAME_MAPPING}': create_mapping_from_schema(table.schema()).model_dump_json()}}) "
                     f"(pyiceberg.table.name_mapping)")
    return f"table {identifier}: " + "; ".join(steps) if steps else ""


def raise_if_broken(table: Any, identifier: str, *, files: bool = False) -> None:
    """Raise :class:`TableBroken` naming every problem of ``table`` and what to do; nothing is written."""
    problems = table_problems(table, files=files)
    if problems:
        raise TableBroken(f"table {identifier} is broken (by an earlier double commit?): "
                          f"{'; '.join(p.what for p in problems)}. Nothing was written. To repair: "
                          f"{what_to_do(identifier, problems)}")
