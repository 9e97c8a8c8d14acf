"""The past in the pipeline's storage: one immutable file per compacted epoch.

Before compaction deletes an epoch's znodes it writes the epoch's full record to the location the
configuration names (``PipelineConfig.archive``)::

    <archive>/<pipeline>/_epochs/epoch-<epoch, 12 digits>.jsonl

JSON lines, sorted and canonical (the same epoch always serialises to the same bytes):

- ``{"kind": "header", "format": 1, "pipeline": ..., "epoch": e, "events_after": z0, "events_through": z1}``
- one ``{"kind": "znode", "path": ..., "data": ..., "stat": [...]}`` per znode of the epoch's subtree
  (the epoch record, attempts, votes, seals, barriers), ``path`` relative to the pipeline's znode
  and ``stat`` kazoo's ``ZnodeStat`` fields in order;
- one ``{"kind": "event", "seq": s, "data": ..., "stat": [...]}`` per history event committed in
  ``(events_after, events_through]`` (the events retention prunes with this epoch);
- ``{"kind": "end", "sha256": ...}``: the digest of every line before it, so a cut-short file is
  recognised, never read as a shorter past.

``data`` is the znode's bytes as UTF-8 text (every payload is JSON), or ``data_b64`` otherwise.

Written once: a file is created under a temporary name and linked to its final name, which fails if
the name exists (local filesystems; on object stores a second writer can only write the same bytes).
A writer that finds the file verifies it instead: every znode and event still in ZooKeeper must be in
the file, identical. Reads of a compacted epoch replay the file through :class:`ArchivedCall`, so the
reader's own functions return exactly what they returned before the epoch left ZooKeeper.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.protocol.states import ZnodeStat

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.base.paths import child_path
from airflow_epochs.coordination.base.znode import Znode
from airflow_epochs.coordination.state.archive_storage import read_stored, write_stored_once
from airflow_epochs.coordination.state.history import event_sequences
from airflow_epochs.coordination.state.pipeline import PipelineContext

_FORMAT = 1
_EPOCHS_DIR = "_epochs"

Watch = Callable[[Any], Any]


class ArchiveMismatch(CorruptPayload):
    """An archive file disagrees with what ZooKeeper still holds of its epoch."""


@dataclass(frozen=True)
class ArchivedEpoch:
    """One epoch's record as archived: znodes by path relative to the pipeline's znode, and events."""

    epoch: int
    znodes: dict[str, Znode]
    events: dict[int, Znode]
    events_after: int
    events_through: int


def epoch_file(location: str, pipeline: str, epoch: int) -> str:
    """Where ``epoch``'s record lives under an archive ``location``."""
    return f"{location.rstrip('/')}/{pipeline}/{_EPOCHS_DIR}/epoch-{epoch:012d}.jsonl"


def archive_location(call: Call, ctx: PipelineContext, epoch: int) -> str | None:
    """The archive location of the configuration in force at ``epoch`` (None: the past is not kept)."""
    return ctx.config_for(call, epoch).config.archive


def archive_locations(call: Call, ctx: PipelineContext) -> list[str]:
    """Every archive location any configuration version named, oldest first, once each."""
    record = ctx.record(call)
    seen: list[str] = []
    for version, _from_epoch in sorted(record.configs):
        location = ctx.config(call, version).config.archive
        if location is not None and location not in seen:
            seen.append(location)
    return seen


# -- encoding ----------------------------------------------------------------------------------


def _data_fields(data: bytes) -> dict[str, str]:
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_b64": base64.b64encode(data).decode("ascii")}


def _data_of(line: dict[str, Any]) -> bytes:
    if "data_b64" in line:
        return base64.b64decode(line["data_b64"])
    return str(line["data"]).encode("utf-8")


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def encode(pipeline: str, record: ArchivedEpoch) -> bytes:
    """The canonical bytes of an epoch's archive file."""
    lines = [_line({"kind": "header", "format": _FORMAT, "pipeline": pipeline, "epoch": record.epoch,
                    "events_after": record.events_after, "events_through": record.events_through})]
    for path in sorted(record.znodes):
        data, stat = record.znodes[path]
        lines.append(_line({"kind": "znode", "path": path, **_data_fields(data), "stat": list(stat)}))
    for seq in sorted(record.events):
        data, stat = record.events[seq]
        lines.append(_line({"kind": "event", "seq": seq, **_data_fields(data), "stat": list(stat)}))
    body = b"".join(lines)
    return body + _line({"kind": "end", "sha256": hashlib.sha256(body).hexdigest()})


def decode(raw: bytes, *, where: str) -> ArchivedEpoch:
    """Parse an archive file; :class:`CorruptPayload` if it is cut short or altered."""
    body, _, last = raw.rstrip(b"\n").rpartition(b"\n")
    try:
        end = json.loads(last)
        if end.get("kind") != "end" or end.get("sha256") != hashlib.sha256(body + b"\n").hexdigest():
            raise CorruptPayload(f"{where}: the archive is incomplete or altered (digest mismatch)")
        lines = [json.loads(line) for line in body.split(b"\n")]
        header = lines[0]
        if header.get("kind") != "header" or header.get("format") != _FORMAT:
            raise CorruptPayload(f"{where}: not an epoch archive of format {_FORMAT}")
        znodes: dict[str, Znode] = {}
        events: dict[int, Znode] = {}
        for line in lines[1:]:
            stat = ZnodeStat(*(int(v) for v in line["stat"]))
            if line["kind"] == "znode":
                znodes[str(line["path"])] = Znode(_data_of(line), stat)
            elif line["kind"] == "event":
                events[int(line["seq"])] = Znode(_data_of(line), stat)
        return ArchivedEpoch(int(header["epoch"]), znodes, events, int(header["events_after"]),
                             int(header["events_through"]))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise CorruptPayload(f"{where}: unreadable archive ({exc})") from None


# -- building from ZooKeeper -------------------------------------------------------------------


def _relative(ctx: PipelineContext, path: str) -> str:
    return path[len(ctx.paths.base):]


def subtree(call: Call, top: str) -> dict[str, Znode]:
    """Every znode under ``top`` (itself included) with its data and stat, read level by level."""
    found: dict[str, Znode] = {}
    level = [top]
    while level:
        for path, raw in zip(level, call.get_many(level), strict=True):
            if raw is not None:
                found[path] = raw
        # only nodes with children are listed: votes and seals, most of an epoch, are leaves
        parents = [path for path in level if path in found and int(found[path].stat.numChildren) > 0]
        listings = [call.children(path) for path in parents]
        level = [child_path(path, child) for path, children in zip(parents, listings, strict=True)
                 for child in children or []]
    return found


def _first_after(call: Call, ctx: PipelineContext, seqs: list[int], zxid: int) -> int:
    """The index of the first event in ``seqs`` committed after ``zxid`` (events are numbered in commit
    order, so a binary search over their stats finds it in log(n) reads)."""
    low, high = 0, len(seqs)
    while low < high:
        middle = (low + high) // 2
        stat = call.exists(ctx.paths.event(seqs[middle]))
        if stat is None or int(stat.czxid) <= zxid:  # pruned events are older than every kept one
            low = middle + 1
        else:
            high = middle
    return low


def _events_in(call: Call, ctx: PipelineContext, after: int, through: int) -> dict[int, Znode]:
    """The history events still in ZooKeeper committed in ``(after, through]`` (zxids)."""
    seqs = event_sequences(call, ctx)  # never a listing of the history (see history.py)
    wanted = seqs[_first_after(call, ctx, seqs, after):_first_after(call, ctx, seqs, through)]
    found: dict[int, Znode] = {}
    for start in range(0, len(wanted), 500):
        batch = wanted[start:start + 500]
        for seq, raw in zip(batch, call.get_many([ctx.paths.event(s) for s in batch]), strict=True):
            if raw is not None and after < int(raw.stat.czxid) <= through:
                found[seq] = raw
    return found


def build(call: Call, ctx: PipelineContext, epoch: int, events_after: int) -> ArchivedEpoch | None:
    """The archive record of ``epoch`` from ZooKeeper (None if its record is gone)."""
    top = ctx.paths.epoch(epoch)
    nodes = subtree(call, top)
    if top not in nodes:
        return None
    through = max(events_after, int(nodes[top].stat.mzxid))
    return ArchivedEpoch(epoch, {_relative(ctx, p): v for p, v in nodes.items()},
                         _events_in(call, ctx, events_after, through), events_after, through)


# -- storage -----------------------------------------------------------------------------------


def _read_file(location: str, pipeline: str, epoch: int) -> bytes | None:
    """The raw archive file of ``epoch``, or None if there is none."""
    return read_stored(location, epoch_file("", pipeline, epoch).lstrip("/"))


def _write_once(location: str, pipeline: str, epoch: int, content: bytes) -> bool:
    """Write an epoch's archive file unless it exists; True if this call wrote it."""
    return write_stored_once(location, epoch_file("", pipeline, epoch).lstrip("/"), content)


def verify(found: ArchivedEpoch, built: ArchivedEpoch, *, where: str) -> None:
    """Everything ZooKeeper still holds of the epoch must be in its archive, unchanged (a compaction cut
    short may already have deleted part of it, and pruned some of its events)."""
    for path, (data, stat) in built.znodes.items():
        kept = found.znodes.get(path)
        if kept is None or kept.data != data or (kept.stat.czxid, kept.stat.mzxid) != (stat.czxid, stat.mzxid):
            raise ArchiveMismatch(f"{where}: znode {path!r} differs from the archive")
    for seq, (data, stat) in built.events.items():
        kept = found.events.get(seq)
        if (kept is None and found.events_after < stat.czxid <= found.events_through) or \
                (kept is not None and kept.data != data):
            raise ArchiveMismatch(f"{where}: history event {seq} differs from the archive")


@dataclass(frozen=True)
class ArchiveOutcome:
    """What :func:`archive_epoch` did: ``written``, ``verified`` or ``gone``, and the znodes of the epoch
    it found in ZooKeeper (so the deletion that follows need not list them again)."""

    status: str
    znodes: tuple[str, ...]


def archive_epoch(call: Call, ctx: PipelineContext, epoch: int, location: str) -> ArchiveOutcome:
    """Make sure ``epoch``'s record is archived: ``written`` by this call, ``verified`` (the file was
    there and agrees with ZooKeeper) or ``gone`` (nothing left in ZooKeeper to archive)."""
    where = epoch_file(location, ctx.pipeline, epoch)
    previous = _read_epoch(ctx, location, epoch - 1) if epoch > 1 else None
    record = build(call, ctx, epoch, previous.events_through if previous else 0)
    if record is None:
        return ArchiveOutcome("gone", ())
    znodes = tuple(ctx.paths.base + path for path in record.znodes)
    existing = _read_file(location, ctx.pipeline, epoch)
    if existing is None and _write_once(location, ctx.pipeline, epoch, encode(ctx.pipeline, record)):
        return ArchiveOutcome("written", znodes)
    existing = existing if existing is not None else _read_file(location, ctx.pipeline, epoch)
    if existing is None:
        raise ArchiveMismatch(f"{where}: the archive vanished while it was being written")
    verify(decode(existing, where=where), record, where=where)
    return ArchiveOutcome("verified", znodes)


def _read_epoch(ctx: PipelineContext, location: str, epoch: int) -> ArchivedEpoch | None:
    """An archived epoch (cached per client: archive files never change), or None."""
    key = f"archive:{location}:{ctx.pipeline}:{epoch}"
    cached = ctx.session.cache.get(key)
    if isinstance(cached, ArchivedEpoch):
        return cached
    raw = _read_file(location, ctx.pipeline, epoch)
    if raw is None:
        return None
    record = decode(raw, where=epoch_file(location, ctx.pipeline, epoch))
    if record.epoch != epoch:
        raise CorruptPayload(f"{epoch_file(location, ctx.pipeline, epoch)}: holds epoch {record.epoch}")
    ctx.session.cache[key] = record
    return record


# -- reading through the archive ---------------------------------------------------------------


class ArchivedCall(Call):
    """A read-only :class:`Call` that answers for one archived epoch's subtree from its archive file and
    for everything else (pipeline record, configurations) from ZooKeeper through ``live``."""

    def __init__(self, live: Call, ctx: PipelineContext, record: ArchivedEpoch) -> None:
        super().__init__(live.session, live.deadline, live.request_id)
        self.live = live
        self.top = ctx.paths.epoch(record.epoch)
        self.nodes = {ctx.paths.base + path: value for path, value in record.znodes.items()}

    def _mine(self, path: str) -> bool:
        return path == self.top or path.startswith(self.top + "/")

    def get(self, path: str, watch: Watch | None = None) -> Znode | None:
        if self._mine(path):
            return self.nodes.get(path)
        return self.live.get(path, watch=watch)

    def get_many(self, paths: Sequence[str]) -> list[Znode | None]:
        theirs = [p for p in paths if not self._mine(p)]
        answers = dict(zip(theirs, self.live.get_many(theirs), strict=True)) if theirs else {}
        return [self.nodes.get(p) if self._mine(p) else answers[p] for p in paths]

    def exists(self, path: str, watch: Watch | None = None) -> Any:
        if self._mine(path):
            found = self.nodes.get(path)
            return None if found is None else found.stat
        return self.live.exists(path, watch=watch)

    def exists_many(self, paths: Sequence[str]) -> list[Any]:
        return [self.exists(p) for p in paths]

    def children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        if not self._mine(path):
            return self.live.children(path, watch=watch)
        if path not in self.nodes:
            return None
        prefix = path + "/"
        return sorted({p[len(prefix):] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix):]})

    def commit(self, ops: Sequence[Any]) -> list[Any]:
        raise CorruptPayload("an archived epoch is read-only")


def archived_call(call: Call, ctx: PipelineContext, epoch: int) -> ArchivedCall | None:
    """A call that reads compacted ``epoch`` from its archive, or None (not compacted, or not archived)."""
    if isinstance(call, ArchivedCall):
        return None
    record = ctx.record(call)
    if not record.first_epoch <= epoch <= record.compacted_through:
        return None
    location = archive_location(call, ctx, epoch)
    if location is None:
        return None
    archived = _read_epoch(ctx, location, epoch)
    return None if archived is None else ArchivedCall(call, ctx, archived)


def archived_events(call: Call, ctx: PipelineContext, since_seq: int) -> list[tuple[int, Znode]]:
    """The archived history events after ``since_seq``, oldest first (each once)."""
    record = ctx.record(call)
    locations = archive_locations(call, ctx)
    found: dict[int, Znode] = {}
    for location in locations:
        # newest first: the files' event ranges follow the epochs, so the walk stops at the first file
        # whose events are all at or before the cursor (a recent cursor reads one or two files)
        for epoch in range(record.compacted_through, record.first_epoch - 1, -1):
            archived = _read_epoch(ctx, location, epoch)
            if archived is None:
                continue
            for seq, value in archived.events.items():
                if seq > since_seq:
                    found.setdefault(seq, value)
            if archived.events and max(archived.events) <= since_seq:
                break
    return [(seq, found[seq]) for seq in sorted(found)]
