"""The records of asset delivery: a scope's cursor and a retired scope (kept in znodes), and the asset
event itself (:class:`SealedPartitionEvent`, kept in the event's ``extra``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads


@dataclass(frozen=True)
class RetiredScope:
    """A retired delivery scope and where its cursors stood (partition -> the next epoch it would have
    delivered); also the stored result of the retirement's request."""

    scope: str
    cursors: dict[str, int]

    def to_result(self) -> dict[str, Any]:
        """The request's stored result (``ctx.request_op(..., result)``)."""
        return {"scope": self.scope, "cursors": dict(self.cursors)}

    @classmethod
    def from_result(cls, result: Any, *, scope: str, path: str) -> RetiredScope:
        """The retirement of ``scope`` stored at ``path``; :class:`CorruptPayload` for anything else (a result
        of another shape or scope: the request id was used for another call)."""
        cursors = result.get("cursors") if isinstance(result, dict) else None
        if not isinstance(result, dict) or result.get("scope") != scope or not isinstance(cursors, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in cursors.items()):
            raise CorruptPayload(f"{path}: not a retirement of delivery scope {scope!r} ({{scope, cursors}}): "
                                 f"{result!r:.200}")
        return cls(scope, dict(cursors))


@dataclass(frozen=True)
class DeliveryCursor:
    """How far a delivery scope has handed a partition's seals to Airflow: the next epoch to deliver,
    and how many of the pipeline's rollbacks its writer had seen (``rewinds``): a rollback it had not
    seen moves it back (:meth:`DeliveryRewinds.position`)."""

    following: int
    rewinds: int = 0

    def to_bytes(self) -> bytes:
        return payloads.encode("asset_cursor", {"following": self.following, "rewinds": self.rewinds})

    def behind(self, following: int, rewinds: int) -> bool:
        """Whether a move to ``(rewinds, following)`` is ahead of this cursor: a writer that saw more
        rollbacks always is; one that saw the same ones, only further on; one that saw fewer never is
        (its confirmation was read before a rollback and would carry the cursor past a new generation)."""
        return (rewinds, following) > (self.rewinds, self.following)

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> DeliveryCursor:
        text = raw.strip()
        if text.isdigit():  # written before the cursor was a versioned payload: the bare number
            return cls(int(text))
        doc = payloads.decode("asset_cursor", raw, path=path)
        rewinds = doc.get("rewinds", 0)  # absent before rollbacks were counted
        if isinstance(rewinds, bool) or not isinstance(rewinds, int) or rewinds < 0:
            raise CorruptPayload(f"{path}: asset_cursor field 'rewinds' is {rewinds!r}, expected a count")
        return cls(int(doc["following"]), rewinds)


# Rollbacks the record remembers; an older one is known to every cursor that could miss it only
# through the oldest kept (see DeliveryRewinds.position).
MAX_REWINDS = 1000


@dataclass(frozen=True)
class DeliveryRewinds:
    """The pipeline's rollbacks as delivery sees them: how many there were, and the epoch each one went
    back to (``(number, to_epoch)``, oldest first, the newest :data:`MAX_REWINDS`). Written by every
    rollback in its own transaction; a cursor written before a rollback reads as moved back to just
    after that rollback's ``to_epoch``, so the seals of the new generation are delivered."""

    count: int = 0
    entries: tuple[tuple[int, int], ...] = ()

    def after(self, to_epoch: int) -> DeliveryRewinds:
        """The record with one more rollback, to ``to_epoch``."""
        entries = (*self.entries, (self.count + 1, to_epoch))[-MAX_REWINDS:]
        return DeliveryRewinds(self.count + 1, entries)

    def since(self, seen: int) -> int | None:
        """The lowest epoch a rollback after the first ``seen`` went back to (None: none came since).
        Rollbacks older than the kept entries count as going back as far as the oldest kept one."""
        if seen >= self.count:
            return None
        unseen = [to for number, to in self.entries if number > seen]
        if self.entries and self.entries[0][0] > seen + 1:  # some it missed are no longer kept
            unseen.append(min(to for _number, to in self.entries))
        return min(unseen, default=0)

    def position(self, cursor: DeliveryCursor) -> int:
        """Where ``cursor`` stands once the rollbacks its writer had not seen are applied."""
        back = self.since(cursor.rewinds)
        return cursor.following if back is None else min(cursor.following, back + 1)

    def trimmed(self, seen_by_all: int) -> DeliveryRewinds:
        """Without the entries every cursor has seen (the count stays)."""
        return DeliveryRewinds(self.count, tuple(entry for entry in self.entries if entry[0] > seen_by_all))

    def to_bytes(self) -> bytes:
        return payloads.encode("delivery_rewinds", {"count": self.count, "entries": [list(e) for e in self.entries]})

    @classmethod
    def from_bytes(cls, raw: bytes, *, path: str) -> DeliveryRewinds:
        doc = payloads.decode("delivery_rewinds", raw, path=path)
        count, entries = doc["count"], doc["entries"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or not isinstance(entries, list) \
                or len(entries) > MAX_REWINDS or not all(
                    isinstance(e, list) and len(e) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                               and v >= 0 for v in e) for e in entries):
            raise CorruptPayload(f"{path}: not a delivery_rewinds record ({{count, entries: [[number, to_epoch]]}})")
        return cls(count, tuple((int(e[0]), int(e[1])) for e in entries))


@dataclass(frozen=True)
class SealedPartitionEvent:
    """The asset event of one sealed (epoch, partition): the schema of the event's ``extra``, written by
    every producer of asset events (the close operator, the seal stream, the declared-key stream) and
    read by every consumer (:meth:`from_extra`).

    ``version`` 1 is the seal itself; a re-sealed version (2, 3, ...) of it is its own event, with the
    ``correction`` that made it. ``dedupe_key`` names the event across redeliveries: a consumer that
    runs once per key runs once per seal (and once per correction of it). ``partition_key`` is the
    epoch's number, or the key a declared partition's producers used.
    """

    pipeline: str
    partition: str
    epoch: int
    generation: int
    attempt: int | None = None
    zxid: int | None = None
    version: int = 1
    correction: str | None = None
    partition_key: str | None = None
    declared: bool = False

    @property
    def key(self) -> str:
        """The event's partition key: the producers' key, or the epoch's number."""
        return self.partition_key if self.partition_key is not None else str(self.epoch)

    @property
    def dedupe_key(self) -> str:
        base = f"{self.pipeline}/{self.partition}/{self.epoch}/{self.generation}"
        return f"{base}/v{self.version}" if self.version > 1 else f"{base}/{self.attempt}"

    def to_extra(self) -> dict[str, Any]:
        """The event's ``extra`` (JSON)."""
        extra: dict[str, Any] = {"pipeline": self.pipeline, "partition": self.partition, "epoch": self.epoch,
                                 "generation": self.generation, "partition_key": self.key, "version": self.version,
                                 "dedupe_key": self.dedupe_key}
        if self.version == 1:
            extra.update(attempt=self.attempt, zxid=self.zxid)
        else:
            extra["correction"] = self.correction
        if self.declared:
            extra["declared"] = True
        return extra

    @classmethod
    def from_extra(cls, extra: Any, *, partition_key: str | None = None) -> SealedPartitionEvent:
        """The event an asset event's ``extra`` carries: as a watcher's trigger stored it (under
        ``payload``) or as the close operator wrote it, or (an event of a correction's versions, emitted
        for several keys at once: ``CorrectedVersions``) the one of the event's ``partition_key``;
        :class:`CorruptPayload` for anything else."""
        doc = extra.get("payload", extra) if isinstance(extra, dict) else None
        if isinstance(doc, dict) and "versions" in doc:
            return CorrectedVersions.from_extra(doc).event(partition_key)
        try:
            if not isinstance(doc, dict):
                raise TypeError("not an object")
            version = int(doc.get("version", 1))
            zxid = doc.get("zxid", doc.get("seal_zxid"))  # the close operator's events before 2026-12
            attempt = doc.get("attempt")
            key = doc.get("partition_key")
            key = None if key is None or str(key) == str(doc["epoch"]) else str(key)  # the epoch's own: implied
            return cls(str(doc["pipeline"]), str(doc["partition"]), int(doc["epoch"]), int(doc.get("generation", 1)),
                       None if attempt is None else int(attempt), None if zxid is None else int(zxid), version,
                       None if doc.get("correction") is None else str(doc["correction"]),
                       key, bool(doc.get("declared")))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptPayload(f"not the asset event of a sealed partition ({exc}): {extra!r:.200}") from exc


# The most versions one correction's events name (one entry per re-sealed epoch, in every event's extra).
MAX_CORRECTED_VERSIONS = 4096


@dataclass(frozen=True)
class CorrectedVersions:
    """The asset events of one correction's re-sealed versions of a partition, emitted together by the task
    that re-produced them: one event per epoch (its partition key), all with this ``extra`` (Airflow gives
    one task one ``extra`` per asset). :meth:`event` is the :class:`SealedPartitionEvent` of one key.

    :param versions: epoch -> (generation, version) of each re-sealed seal of the partition.
    """

    pipeline: str
    partition: str
    correction: str
    versions: dict[int, tuple[int, int]]

    def __post_init__(self) -> None:
        if len(self.versions) > MAX_CORRECTED_VERSIONS:
            raise CorruptPayload(f"a correction's events name at most {MAX_CORRECTED_VERSIONS} versions, "
                                 f"not {len(self.versions)}")

    def event(self, key: str | None) -> SealedPartitionEvent:
        """The event of partition key ``key`` (an epoch this correction re-sealed)."""
        try:
            epoch = int(str(key))
            generation, version = self.versions[epoch]
        except (KeyError, TypeError, ValueError):
            raise CorruptPayload(f"correction {self.correction!r} of {self.partition!r} re-sealed epochs "
                                 f"{sorted(self.versions)[:10]}, not partition key {key!r}") from None
        return SealedPartitionEvent(self.pipeline, self.partition, epoch, generation, version=version,
                                    correction=self.correction)

    def to_extra(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "partition": self.partition, "correction": self.correction,
                "versions": {str(e): [g, v] for e, (g, v) in sorted(self.versions.items())}}

    @classmethod
    def from_extra(cls, doc: Any) -> CorrectedVersions:
        try:
            versions = {int(e): (int(g), int(v)) for e, (g, v) in doc["versions"].items()}
            return cls(str(doc["pipeline"]), str(doc["partition"]), str(doc["correction"]), versions)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptPayload(f"not the asset events of a correction ({exc}): {doc!r:.200}") from exc
