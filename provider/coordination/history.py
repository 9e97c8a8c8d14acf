"""The pipeline's history: one sequential znode per state change, written in the same transaction as
the change, so the history is exactly the sequence of committed changes.

Reads are incremental: :func:`read_events` fetches only the events after a cursor (the sequence
number of the last event seen), and :func:`latest_event` costs two small reads: ZooKeeper numbers a
sequential child with its parent's child-change counter, so the ``history`` node's stat names the
newest event (unless the last change was retention pruning events, when the names are listed once).
Retention prunes the events of compacted epochs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_epochs.coordination.errors import PipelineNotFound
from airflow_epochs.coordination.paths import PipelinePaths
from airflow_epochs.coordination.records import Event
from airflow_epochs.coordination.session import Call
from airflow_epochs.coordination.steps import Create, Step
from airflow_epochs.coordination.wire import EventNode

# Events read per round trip when catching up with a long history.
READ_BATCH = 500


def event_ops(paths: PipelinePaths, event: str, at: float, detail: Mapping[str, Any]) -> list[Step]:
    """The step that records ``event``: its own sequential znode, committed with the change it describes."""
    return [Create(paths.history_prefix(), EventNode(event, at, detail).to_bytes(), sequential=True)]


def commit(call: Call, ops: Sequence[Step]) -> list[Any]:
    """Commit a change with its history record (one multi-op)."""
    return call.commit(ops)


def event_seq(name: str) -> int | None:
    """The sequence number of a history child name, or None if it is not an event."""
    if name.startswith("h-") and name[2:].isdigit():
        return int(name[2:])
    return None


def event_sequences(call: Call, paths: PipelinePaths) -> list[int]:
    """Every event's sequence number, oldest first (names only: no event is read)."""
    names = call.children(paths.history)
    if names is None:
        raise PipelineNotFound(f"pipeline {paths.pipeline!r} does not exist under {paths.root}")
    return sorted(seq for seq in (event_seq(n) for n in names) if seq is not None)


def read_events(call: Call, paths: PipelinePaths, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
    """The events after ``since_seq`` (a cursor: the ``seq`` of the last event seen), oldest first.

    Only the events returned are read; ``limit`` caps how many.
    """
    seqs = [s for s in event_sequences(call, paths) if s > since_seq]
    if limit is not None:
        seqs = seqs[:limit]
    events: list[Event] = []
    for start in range(0, len(seqs), READ_BATCH):
        batch = seqs[start:start + READ_BATCH]
        for seq, raw in zip(batch, call.get_many([paths.event(s) for s in batch]), strict=True):
            if raw is None:  # pruned meanwhile
                continue
            node = EventNode.from_bytes(raw[0], path=paths.event(seq))
            events.append(Event(seq, int(raw[1].czxid), node.event, node.at, node.detail))
    return events


def latest_event(call: Call, paths: PipelinePaths) -> Event | None:
    """The newest event: the history node's child-change counter names it (two small reads)."""
    for _ in range(3):
        stat = call.exists(paths.history)
        if stat is None:
            raise PipelineNotFound(f"pipeline {paths.pipeline!r} does not exist under {paths.root}")
        if int(stat.numChildren) == 0:
            return None
        seq = int(stat.cversion) - 1
        raw = call.get(paths.event(seq))
        if raw is None:  # the last change was a deletion (retention): list the names instead
            seqs = event_sequences(call, paths)
            if not seqs:
                return None
            seq = seqs[-1]
            raw = call.get(paths.event(seq))
            if raw is None:
                continue  # pruned meanwhile: look again
        node = EventNode.from_bytes(raw[0], path=paths.event(seq))
        return Event(seq, int(raw[1].czxid), node.event, node.at, node.detail)
    return None
