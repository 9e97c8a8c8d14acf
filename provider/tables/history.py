"""What a table's snapshot history says about published epochs: the summary properties we stamp into
each snapshot, and the epochs live at any snapshot (reading the history only, never the data)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import EpochsError

PREFIX = "epochs."
PIPELINE = PREFIX + "pipeline"
PARTITION = PREFIX + "partition"
EPOCH = PREFIX + "epoch"
ATTEMPT = PREFIX + "attempt"
GENERATION = PREFIX + "generation"
REQUEST = PREFIX + "request"
ACTION = PREFIX + "action"
ROLLBACK_TO = PREFIX + "rollback-to"
REMOVED_EPOCHS = PREFIX + "removed-epochs"
MODE = PREFIX + "mode"
VERSION = PREFIX + "version"  # the version of the seal whose files a publish or re-seal snapshot holds
CORRECTION = PREFIX + "correction"  # a re-seal snapshot's correction, its re-seal request and reason
RESEAL_REQUEST = PREFIX + "reseal-request"
REASON = PREFIX + "reason"

PUBLISH = "publish"
ROLLBACK = "rollback"
RESEAL = "reseal"  # the files of a published epoch replaced by a newer version of its seal


class EpochNotPublished(EpochsError):
    """The table has no snapshot of that epoch (not published yet, or rolled back)."""


class NoSnapshotOfItsOwn(EpochsError):
    """No snapshot shows the table as of that epoch alone (a re-seal of an earlier epoch, committed after
    later epochs were published, holds those too): read the epoch's files instead."""


class TableOfAnotherPartition(EpochsError):
    """The table already holds another pipeline's or partition's epochs; nothing was written."""


@dataclass(frozen=True)
class PublishedSnapshot:
    """One snapshot we made: a publish of (epoch, attempt, generation) or a rollback to an epoch."""

    snapshot_id: int
    action: str
    pipeline: str
    partition: str
    epoch: int  # the published epoch, or the epoch a rollback went back to
    attempt: int
    generation: int
    request: str
    timestamp_ms: int
    version: int = 1  # the seal's version (a publish of a re-sealed epoch, or a re-seal snapshot)
    correction: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"snapshot_id": self.snapshot_id, "action": self.action, "pipeline": self.pipeline,
                "partition": self.partition, "epoch": self.epoch, "attempt": self.attempt,
                "generation": self.generation, "request": self.request, "timestamp_ms": self.timestamp_ms,
                "version": self.version, "correction": self.correction}


def summary_properties(snapshot: Any) -> Mapping[str, str]:
    """The free-form properties of a snapshot's summary (ours among them)."""
    summary = snapshot.summary
    if summary is None:
        return {}
    return dict(summary.additional_properties)


def published(snapshot: Any) -> PublishedSnapshot | None:
    """Our record in ``snapshot``'s summary, or None for a snapshot someone else made."""
    props = summary_properties(snapshot)
    action = props.get(ACTION)
    if action not in (PUBLISH, ROLLBACK, RESEAL):
        return None
    epoch = props.get(ROLLBACK_TO) if action == ROLLBACK else props.get(EPOCH)
    return PublishedSnapshot(int(snapshot.snapshot_id), action, props.get(PIPELINE, ""), props.get(PARTITION, ""),
                             int(epoch or 0), int(props.get(ATTEMPT, 0) or 0), int(props.get(GENERATION, 0) or 0),
                             props.get(REQUEST, ""), int(snapshot.timestamp_ms), int(props.get(VERSION, 1) or 1),
                             props.get(CORRECTION, ""))


def ancestry(table: Any, snapshot_id: int | None = None) -> Iterator[Any]:
    """The snapshots from ``snapshot_id`` (default: the current one) back to the first, newest first."""
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None


def live_epochs(table: Any, snapshot_id: int | None = None) -> dict[int, PublishedSnapshot]:
    """Epoch -> the publish snapshot whose files are live at ``snapshot_id`` (default: now).

    Walking back from the snapshot, a rollback to k hides every older publish of an epoch after k; the
    newest publish or re-seal of an epoch wins (a republish after a rollback, a newer version).
    """
    cutoff: int | None = None
    live: dict[int, PublishedSnapshot] = {}
    for snapshot in ancestry(table, snapshot_id):
        record = published(snapshot)
        if record is None:
            continue
        if record.action == ROLLBACK:
            cutoff = record.epoch if cutoff is None else min(cutoff, record.epoch)
        elif (cutoff is None or record.epoch <= cutoff) and record.epoch not in live:
            live[record.epoch] = record
    return dict(sorted(live.items()))


def last_published_epoch(table: Any) -> int | None:
    """The newest epoch live in the table now (None: nothing published, or everything rolled back)."""
    live = live_epochs(table)
    return max(live) if live else None


def find_publish(table: Any, pipeline: str, partition: str, epoch: int, attempt: int, generation: int,
                 request: str) -> PublishedSnapshot | None:
    """The snapshot that published exactly this seal, if the current snapshot descends from it (a
    snapshot left off the current line, e.g. by making an older snapshot current, does not count)."""
    for snapshot in ancestry(table):
        record = published(snapshot)
        if (record is not None and record.action == PUBLISH
                and (record.pipeline, record.partition, record.epoch, record.attempt, record.generation,
                     record.request) == (pipeline, partition, epoch, attempt, generation, request)):
            return record
    return None


def find_reseal(table: Any, pipeline: str, partition: str, epoch: int, version: int) -> PublishedSnapshot | None:
    """The re-seal snapshot that put ``version`` of ``epoch`` in the table, if the current snapshot
    descends from it (how a repeated or raced re-seal publish finds that it is done)."""
    for snapshot in ancestry(table):
        record = published(snapshot)
        if (record is not None and record.action == RESEAL
                and (record.pipeline, record.partition, record.epoch, record.version) == (pipeline, partition, epoch,
                                                                                          version)):
            return record
    return None


def snapshot_of_version(table: Any, epoch: int, version: int) -> PublishedSnapshot:
    """The snapshot that made ``version`` of ``epoch`` live (its publish, or its re-seal).

    :raises EpochNotPublished: no snapshot of the current line holds that version of that epoch.
    """
    for snapshot in ancestry(table):
        record = published(snapshot)
        if record is not None and record.action != ROLLBACK and (record.epoch, record.version) == (epoch, version):
            return record
    raise EpochNotPublished(f"table {table_name(table)}: version {version} of epoch {epoch} was never published")


def snapshot_of_epoch(table: Any, epoch: int) -> PublishedSnapshot:
    """The snapshot that shows the table as of ``epoch``: the live publish of that epoch now.

    :raises EpochNotPublished: that epoch is not live in the table.
    """
    live = live_epochs(table)
    if epoch not in live:
        newest = max(live) if live else None
        raise EpochNotPublished(f"table {table_name(table)}: epoch {epoch} is not published "
                                f"(live epochs: {_span(list(live))}; newest {newest})")
    return live[epoch]


def check_owner(table: Any, pipeline: str, partition: str) -> None:
    """Refuse a table that holds another pipeline's or partition's epochs."""
    for snapshot in table.snapshots():
        record = published(snapshot)
        if record is not None and (record.pipeline, record.partition) != (pipeline, partition):
            raise TableOfAnotherPartition(
                f"table {table_name(table)} holds partition {record.partition!r} of pipeline {record.pipeline!r}, "
                f"not {partition!r} of {pipeline!r}; nothing was written")


def table_name(table: Any) -> str:
    return ".".join(table.name())


def _span(epochs: list[int]) -> str:
    if not epochs:
        return "none"
    return f"{epochs[0]}..{epochs[-1]}" if len(epochs) > 1 else str(epochs[0])
