"""The pipeline's history: one sequential znode per state change, written in the same transaction as
the change, so the history is exactly the sequence of committed changes.

Reads are incremental: :func:`read_events` fetches only the events after a cursor (the sequence
number of the last event seen), and :func:`latest_event` costs two small reads: ZooKeeper numbers a
sequential child by how many children its parent has had created, so the ``history`` node's stat
names the newest event (unless that event was deleted, when the numbers below it are probed). The
``history`` node is never listed (:func:`event_sequences`): every answer is one stat or one event,
however many events it holds. Retention prunes the events of compacted epochs, oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import PipelineNotFound
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.base.steps import Create, Step
from airflow_epochs.coordination.wire.nodes import EventNode
from airflow_epochs.coordination.wire.records import Event

if TYPE_CHECKING:  # the context records events through this module: a type-only import, no circle
    from airflow_epochs.coordination.state.pipeline import PipelineContext

# Events read per round trip when catching up with a long history.
READ_BATCH = 500
# Event numbers probed (one stat each) per round trip when finding which events exist.
PROBE_BATCH = 500


def event_ops(paths: PipelinePaths, event: str, at: float, detail: Mapping[str, Any]) -> list[Step]:
    """The step that records ``event``: its own sequential znode, committed with the change it describes."""
    return [Create(paths.history_prefix(), EventNode(event, at, detail).to_bytes(), sequential=True)]


def commit(call: Call, ops: Sequence[Step]) -> list[Any]:
    """Commit a change with its history record (one multi-op)."""
    return call.commit(ops)


def _event_seq(name: str) -> int | None:
    """The sequence number of a history child name, or None if it is not an event."""
    if name.startswith("h-") and name[2:].isdigit():
        return int(name[2:])
    return None


def event_sequences(call: Call, ctx: PipelineContext, *, since_seq: int = -1) -> list[int]:
    """The sequence numbers of the events after ``since_seq``, oldest first (names only: no event is read).

    The history node is never listed: its listing grows with the events it holds and, past
    ``jute.maxbuffer``, would put the client in a reconnect loop. Its stat says it all instead
    (:func:`_newest_seq`): events are numbered in creation order and retention deletes the oldest
    first, so the events kept are the last ``numChildren`` numbers, and two stats (the oldest and the
    newest of them) confirm it. If either is missing, events were deleted out of order, and the
    numbers are probed one by one (:func:`_probe_sequences`). A number whose event is deleted after
    this answer is skipped by the caller's read, as before.
    """
    stat = _history_stat(call, ctx)
    count, newest = int(stat.numChildren), _newest_seq(stat)
    if count == 0:
        return []
    oldest = newest - count + 1
    if since_seq >= newest:
        return []
    ends = call.exists_many([ctx.paths.event(oldest), ctx.paths.event(newest)])
    if any(end is None for end in ends):
        return _probe_sequences(call, ctx, since_seq=since_seq)
    return list(range(max(since_seq + 1, oldest), newest + 1))


def _probe_sequences(call: Call, ctx: PipelineContext, *, since_seq: int = -1, most: int | None = None) -> list[int]:
    """The event numbers above ``since_seq`` (at most the ``most`` newest), oldest first, each checked:
    :data:`PROBE_BATCH` stats per round trip, newest first, until the child count is accounted for."""
    first = _history_stat(call, ctx)
    count = int(first.numChildren)
    want = count
    found: list[int] = []
    seq = _newest_seq(first)
    while seq > since_seq and len(found) < want and (most is None or len(found) < most):
        low = max(since_seq + 1, seq - PROBE_BATCH + 1)
        batch = list(range(seq, low - 1, -1))
        stats = call.exists_many([ctx.paths.event(s) for s in batch])
        found += [s for s, stat in zip(batch, stats, strict=True) if stat is not None]
        seq = low - 1
        if seq > since_seq and len(found) < want:
            # retention may be pruning the oldest events meanwhile: not all of them are still to be found
            want = count - (deletions(_history_stat(call, ctx)) - deletions(first))
    found.sort()
    return found if most is None else found[-most:]


def _newest_seq(stat: Any) -> int:
    """The number of the newest event ever created under the history node (-1: none yet).

    A sequential child is numbered by how many children its parent has had created; ZooKeeper
    reports ``cversion`` as creations plus deletions (``DataNode.copyStat``: creations x 2 minus the
    children present), so the creations are ``(cversion + numChildren) / 2``.
    """
    return (int(stat.cversion) + int(stat.numChildren)) // 2 - 1


def deletions(stat: Any) -> int:
    """How many children of the node have been deleted (see :func:`_newest_seq`)."""
    return (int(stat.cversion) - int(stat.numChildren)) // 2


def _history_stat(call: Call, ctx: PipelineContext) -> Any:
    stat = call.exists(ctx.paths.history)
    if stat is None:
        raise PipelineNotFound(f"pipeline {ctx.paths.pipeline!r} does not exist under {ctx.paths.root}")
    return stat


def read_events(call: Call, ctx: PipelineContext, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
    """The events after ``since_seq`` (a cursor: the ``seq`` of the last event seen), oldest first.

    Only the events returned are read; ``limit`` caps how many.
    """
    seqs = event_sequences(call, ctx, since_seq=since_seq)
    if limit is not None:
        seqs = seqs[:limit]
    events = _read(call, ctx, seqs)
    if limit is None and seqs and len(events) < len(seqs) and since_seq < seqs[0] - 1:
        # numbers without events inside the kept range: if events were deleted out of order, the
        # count puts the range too high, and some lie below it: check every number
        below = [s for s in _probe_sequences(call, ctx, since_seq=since_seq) if s < seqs[0]]
        events = _read(call, ctx, below) + events
    return events


def _read(call: Call, ctx: PipelineContext, seqs: Sequence[int]) -> list[Event]:
    events: list[Event] = []
    for start in range(0, len(seqs), READ_BATCH):
        batch = seqs[start:start + READ_BATCH]
        for seq, raw in zip(batch, call.get_many([ctx.paths.event(s) for s in batch]), strict=True):
            if raw is None:  # pruned meanwhile
                continue
            node = EventNode.from_bytes(raw.data, path=ctx.paths.event(seq))
            events.append(Event(seq, int(raw.stat.czxid), node.event, node.at, node.detail))
    return events


def latest_event(call: Call, ctx: PipelineContext) -> Event | None:
    """The newest event: the history node's child-change counter names it (two small reads)."""
    for _ in range(3):
        stat = call.exists(ctx.paths.history)
        if stat is None:
            raise PipelineNotFound(f"pipeline {ctx.paths.pipeline!r} does not exist under {ctx.paths.root}")
        if int(stat.numChildren) == 0:
            return None
        seq = _newest_seq(stat)
        raw = call.get(ctx.paths.event(seq))
        if raw is None:  # the newest was deleted (pruned, or out of order): probe down for the newest
            seqs = _probe_sequences(call, ctx, most=1)
            if not seqs:
                return None
            seq = seqs[-1]
            raw = call.get(ctx.paths.event(seq))
            if raw is None:
                continue  # pruned meanwhile: look again
        node = EventNode.from_bytes(raw.data, path=ctx.paths.event(seq))
        return Event(seq, int(raw.stat.czxid), node.event, node.at, node.detail)
    return None
