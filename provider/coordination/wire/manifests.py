"""The manifest a Spark run writes (``_MANIFEST.json`` in its run directory) and the part of it its
vote carries, as one record: :class:`RunManifest`. The Spark job builds it, the submitter checks it
against its run and votes :meth:`RunManifest.vote_summary`, and every reader of a seal (Spark readers,
the tables, the UI) reads a producer's vote back with :meth:`RunManifest.from_vote`, by attribute.

A vote is any JSON a producer chose; only a vote with an ``outputs`` object is a Spark run's
(:meth:`RunManifest.from_vote` is None for the others). :func:`manifest_totals` adds up what the UI
shows over any votes, Spark's or a plain ``{"rows": n}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import CorruptPayload

# The output that carries the state an epoch leaves for the next one.
_SNAPSHOT_OUTPUT = "snapshot"
# The vote's key for the voting task's OpenLineage run (the submitter writes it; lineage reads it).
LINEAGE_RUN = "lineage_run"
LINEAGE_DATASET = "lineage_dataset"  # the vote's key for the dataset its partition is published as
# What of a run's manifest goes into its vote (small: locations, counts, checksums).
_VOTED = ("epoch", "attempt", "run", "location", "outputs", "config_version", "snapshot_from", "seconds")


@dataclass(frozen=True)
class OutputFiles:
    """One output of a run: where its files are, their format, and what the job counted of them."""

    path: str
    format: str = "parquet"
    rows: int = 0
    checksum: str = ""
    files: int | None = None
    bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path, "format": self.format, "rows": self.rows, "checksum": self.checksum}
        if self.files is not None:
            body["files"] = self.files
        if self.bytes is not None:
            body["bytes"] = self.bytes
        return body

    @classmethod
    def from_json(cls, doc: Any, *, where: str) -> OutputFiles:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("path"), str):
            raise CorruptPayload(f"{where}: an output is not an object with a path: {doc!r}")
        return cls(doc["path"], str(doc.get("format", "parquet")), _int(doc.get("rows", 0), where, "rows"),
                   str(doc.get("checksum", "")), _optional_int(doc.get("files"), where, "files"),
                   _optional_int(doc.get("bytes"), where, "bytes"))


@dataclass(frozen=True)
class LineageRun:
    """The OpenLineage run of the task that voted."""

    namespace: str
    job: str
    run_id: str

    def to_json(self) -> dict[str, str]:
        return {"namespace": self.namespace, "job": self.job, "runId": self.run_id}

    @classmethod
    def from_json(cls, doc: Any) -> LineageRun | None:
        """None unless ``doc`` names all three (a vote recorded no run, or not all of it)."""
        if not isinstance(doc, Mapping) or not all(isinstance(doc.get(k), str) for k in ("namespace", "job", "runId")):
            return None
        return cls(doc["namespace"], doc["job"], doc["runId"])


@dataclass(frozen=True)
class RunManifest:
    """What one Spark run wrote: its run (epoch, attempt, run id), its run directory and outputs, and
    how it came about (configuration version, the epoch its snapshot came from, seconds it took)."""

    epoch: int
    attempt: int
    run: str
    location: str
    outputs: Mapping[str, OutputFiles]
    config_version: int | None = None
    snapshot_from: int | None = None
    seconds: float | None = None
    pipeline: str | None = None
    partition: str | None = None
    producer: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    lineage_run: LineageRun | None = None

    @property
    def snapshot(self) -> OutputFiles | None:
        """The output carrying the state this epoch leaves for the next one, if the run wrote one."""
        return self.outputs.get(_SNAPSHOT_OUTPUT)

    def to_json(self) -> dict[str, Any]:
        """The whole manifest, as the run directory's ``_MANIFEST.json`` holds it."""
        body: dict[str, Any] = {
            "pipeline": self.pipeline, "partition": self.partition, "producer": self.producer, "epoch": self.epoch,
            "attempt": self.attempt, "run": self.run, "config_version": self.config_version,
            "location": self.location, "outputs": {name: o.to_json() for name, o in self.outputs.items()},
            "snapshot_from": self.snapshot_from, "seconds": self.seconds, "extra": dict(self.extra)}
        if self.lineage_run is not None:
            body[LINEAGE_RUN] = self.lineage_run.to_json()
        return body

    def vote_summary(self) -> dict[str, Any]:
        """The part of the manifest that goes into the vote."""
        whole = self.to_json()
        body = {key: whole[key] for key in _VOTED}
        if self.lineage_run is not None:
            body[LINEAGE_RUN] = self.lineage_run.to_json()
        return body

    @classmethod
    def from_json(cls, doc: Any, *, where: str) -> RunManifest:
        """A manifest or a vote summary as stored; :class:`CorruptPayload` (naming ``where``) if it is not one."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("outputs"), Mapping):
            raise CorruptPayload(f"{where}: not a run's manifest (no outputs)")
        seconds = doc.get("seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            raise CorruptPayload(f"{where}: seconds {seconds!r} is not a number")
        extra = doc.get("extra")
        outputs = {str(name): OutputFiles.from_json(o, where=f"{where} output {name!r}")
                   for name, o in doc["outputs"].items()}
        return cls(
            _int(doc.get("epoch"), where, "epoch"), _int(doc.get("attempt"), where, "attempt"), str(doc.get("run")),
            str(doc.get("location")),
            outputs,
            _optional_int(doc.get("config_version"), where, "config_version"),
            _optional_int(doc.get("snapshot_from"), where, "snapshot_from"),
            None if seconds is None else float(seconds),
            _optional_str(doc.get("pipeline")), _optional_str(doc.get("partition")), _optional_str(doc.get("producer")),
            dict(extra) if isinstance(extra, Mapping) else {}, LineageRun.from_json(doc.get(LINEAGE_RUN)))

    @classmethod
    def from_vote(cls, vote: Any, *, where: str = "a vote") -> RunManifest | None:
        """The manifest a vote carries, or None if the vote is not a Spark run's (no ``outputs``)."""
        if not isinstance(vote, Mapping) or not isinstance(vote.get("outputs"), Mapping):
            return None
        return cls.from_json(vote, where=where)


def vote_lineage_run(vote: Any) -> LineageRun | None:
    """The OpenLineage run a vote recorded (any vote, Spark's or not), or None."""
    return LineageRun.from_json(vote.get(LINEAGE_RUN)) if isinstance(vote, Mapping) else None


def vote_lineage_dataset(vote: Any) -> tuple[str, str] | None:
    """(namespace, name) of the dataset a vote says its partition is known by (the table it is published
    into, ``lineage_dataset`` in the vote), or None."""
    declared = vote.get(LINEAGE_DATASET) if isinstance(vote, Mapping) else None
    if not isinstance(declared, Mapping):
        return None
    namespace, name = declared.get("namespace"), declared.get("name")
    return (namespace, name) if isinstance(namespace, str) and isinstance(name, str) else None


def vote_location(vote: Any) -> str | None:
    """The run folder a vote names (``location`` of a Spark run's manifest), or None."""
    location = vote.get("location") if isinstance(vote, Mapping) else None
    return location if isinstance(location, str) else None


def manifest_totals(votes: Iterable[Any]) -> dict[str, int | float]:
    """Rows, bytes, files and Spark seconds added up over votes (a Spark run's outputs other than the
    snapshot, or a plain vote's top-level ``rows``/``bytes``/``files``); keys no vote has are left out."""
    total: dict[str, float] = {}
    for vote in votes:
        if not isinstance(vote, Mapping):
            continue
        outputs = vote.get("outputs")
        items = [o for name, o in outputs.items() if name != _SNAPSHOT_OUTPUT and isinstance(o, Mapping)] \
            if isinstance(outputs, Mapping) else [vote]
        for item in items:
            for key in ("rows", "bytes", "files"):
                value = item.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[key] = total.get(key, 0) + value
        seconds = vote.get("seconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            total["seconds"] = total.get("seconds", 0) + seconds
    return {k: (int(v) if k != "seconds" else round(v, 3)) for k, v in total.items()}


def _int(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptPayload(f"{where}: {name} {value!r} is not an integer")
    return value


def _optional_int(value: Any, where: str, name: str) -> int | None:
    return None if value is None else _int(value, where, name)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
