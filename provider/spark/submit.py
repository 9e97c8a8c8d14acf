"""Submit-and-seal, the protocol around one producer's Spark job (no Airflow import).

1. Ask the ledger whether the job may run (previous epoch sealed, attempt current) and from which
   snapshot; a retry after this attempt's vote landed runs nothing.
2. Hold the partition's write lock while the job runs, and ask again holding it.
3. Run the job into its own run directory (the caller's ``runner``: spark-submit, Spark Connect, a
   local session), read its manifest, check it belongs to this run.
4. Vote the manifest and the snapshot pointer; once the partition is sealed, delete the run
   directories the seal does not name.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kazoo.client import KazooClient

from airflow_epochs.coordination.base.errors import CorruptPayload, InvalidInput, PartitionAlreadySealed
from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.coordination.base.retrying import Backoff, call_with_retries, describe
from airflow_epochs.coordination.ledger import Attempt, EpochLedger
from airflow_epochs.coordination.recipes.corrections.records import read_key
from airflow_epochs.coordination.services.submission import SubmitDecision, check_submission
from airflow_epochs.coordination.wire.manifests import LINEAGE_DATASET, LINEAGE_RUN, RunManifest
from airflow_epochs.coordination.wire.records import SnapshotRef
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.context import EpochContext
from airflow_epochs.spark.run_paths import check_manifest_outputs, check_snapshot_pointer
from airflow_epochs.spark.sealed import sealed_outputs, sealed_runs
from airflow_epochs.spark.storage import collect_garbage, read_manifest, run_location

log = logging.getLogger(__name__)

Runner = Callable[[EpochContext], "Mapping[str, Any] | None"]

#: How long the vote after a finished job rides out ZooKeeper trouble before giving up (the job's
#: output would otherwise be thrown away and the job run again by the task's retry).
# Seconds a job waits for its partition's write lock (the operator's and the hook's default too).
WRITE_LOCK_TIMEOUT_S = 300.0
VOTE_BACKOFF = Backoff(first=0.5, factor=2.0, cap=8.0, budget=90.0)


class JobWithoutManifest(CorruptPayload):
    """The job ended without writing its manifest (it failed, or never called ``finish``)."""


@dataclass(frozen=True)
class SubmitOutcome:
    """What :func:`submit_and_seal` did: ``ran`` the job, or found it ``voted``/``sealed`` already."""

    action: Literal["ran", "voted", "sealed"]
    epoch: int
    partition: str
    producer: str
    manifest: Mapping[str, Any] | None
    partition_sealed: bool
    epoch_sealed: bool = False
    run: str | None = None
    snapshot_epoch: int | None = None
    removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "epoch": self.epoch, "partition": self.partition, "producer": self.producer,
                "manifest": None if self.manifest is None else dict(self.manifest),
                "partition_sealed": self.partition_sealed, "epoch_sealed": self.epoch_sealed, "run": self.run,
                "snapshot_epoch": self.snapshot_epoch, "removed": len(self.removed)}


def vote_summary(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run's manifest that goes into the vote (small: locations, counts, checksums)."""
    return RunManifest.from_json(manifest, where="the run's manifest").vote_summary()


def snapshot_pointer(manifest: RunManifest, epoch: int) -> dict[str, Any] | None:
    snapshot = manifest.snapshot
    if snapshot is None:
        return None
    return {"path": snapshot.path, "format": snapshot.format, "epoch": epoch, "checksum": snapshot.checksum}


def partition_reads(pipeline: str, epoch: int, partition: str, sealed_inputs: Mapping[str, str] | None,
                    snapshot_epoch: int | None) -> dict[str, int]:
    """The lineage vector of a job's reads within its pipeline (see ``read_key``): the sealed inputs of its
    epoch, and its own partition at the epoch whose snapshot it started from; a re-seal of any of them
    re-produces the job's seal (``EpochLedger.reseal``)."""
    reads = {read_key(pipeline, upstream): epoch for upstream in (sealed_inputs or {}).values()}
    if snapshot_epoch is not None:
        reads[read_key(pipeline, partition)] = snapshot_epoch
    return reads


@dataclass(frozen=True)
class InputsRead:
    """The job's named inputs (``paths``: input name -> the path or paths it reads), and the version
    read of each sealed input partition (``versions``: partition -> version; a partition whose seal
    names no such output is left out, and judged by when the job ran)."""

    paths: dict[str, str | list[str]]
    versions: dict[str, int]


def version_reads(pipeline: str, partition: str, inputs: InputsRead, snapshot: SnapshotRef | None) -> dict[str, int]:
    """The versions the job read of what :func:`partition_reads` names (the vote's ``read_versions``): each
    sealed input's version its paths came from, and the version of its own partition whose snapshot it
    started from. A correction re-produces the job's seal only if one of them is older than the corrected
    version, so a job that read a re-sealed version is not re-run for it."""
    reads = {read_key(pipeline, upstream): version for upstream, version in inputs.versions.items()}
    if snapshot is not None:
        reads[read_key(pipeline, partition)] = snapshot.version
    return reads


def resolved_inputs(ledger: EpochLedger, epoch: int, inputs: Mapping[str, str] | None,
                    sealed_inputs: Mapping[str, str] | None) -> InputsRead:
    """The job's named inputs: ``inputs`` as given, and each of ``sealed_inputs`` (input name ->
    partition of the same epoch) as the output path(s) the newest sealed version's manifests name."""
    resolved: dict[str, str | list[str]] = dict(inputs or {})
    versions: dict[str, int] = {}
    for name, upstream in (sealed_inputs or {}).items():
        outputs = sealed_outputs(ledger, upstream, [epoch])
        paths = [item.path for item in outputs]
        resolved[name] = paths[0] if len(paths) == 1 else paths
        for item in outputs:  # two names of one partition may have read it across a re-seal: the older counts
            versions[upstream] = min(versions.get(upstream, item.version), item.version)
    return InputsRead(resolved, versions)


def run_for_manifest(runner: Callable[[EpochContext], Mapping[str, Any] | None], context: EpochContext,
                     location: str, *, job: str) -> RunManifest:
    """Run the job for ``context`` and return its manifest (as returned, or read from the run folder
    ``location``), checked before anything is voted: of this very run, and every output it names there
    (readers and publish trust the seal).

    :param job: the job as the refusal names it (``'daily'``, ``'daily' version 2``).
    :raises JobWithoutManifest: no manifest, or one of another run.
    """
    manifest = runner(context)
    if manifest is None:
        manifest = read_manifest(location)
    if manifest is None:
        raise JobWithoutManifest(f"epoch {context.epoch}: the job for {job} ended without a manifest "
                                 f"in {redact_uri(location)}; nothing was voted")
    record = RunManifest.from_json(manifest, where=f"the manifest in {redact_uri(location)}")
    if (record.epoch, record.attempt, record.run) != (context.epoch, context.attempt, context.run):
        raise JobWithoutManifest(f"the manifest in {redact_uri(location)} belongs to another run: "
                                 f"{record.epoch}/{record.attempt}/{record.run}")
    check_manifest_outputs(location, record)
    return record


def _settled(decision: SubmitDecision) -> SubmitOutcome | None:
    if decision.action == "submit":
        return None
    return SubmitOutcome("sealed" if decision.action == "sealed" else "voted", decision.attempt.epoch,
                         decision.partition, decision.producer, decision.manifest,
                         partition_sealed=decision.action == "sealed")


def submit_and_seal(
    zookeeper: KazooClient | EpochLedger,
    attempt: Attempt,
    partition: str,
    producer: str,
    *,
    storage: str,
    runner: Runner,
    inputs: Mapping[str, str] | None = None,
    sealed_inputs: Mapping[str, str] | None = None,
    buckets: tuple[int, ...] = (),
    lock_timeout: float = WRITE_LOCK_TIMEOUT_S,
    root: str = DEFAULT_ROOT,
    lineage_run: Mapping[str, str] | None = None,
    lineage_dataset: Mapping[str, str] | None = None,
) -> SubmitOutcome:
    """Run one producer's job for ``attempt``'s epoch and vote its manifest (see the module docstring).

    :param zookeeper: a started KazooClient, or the :class:`EpochLedger` of ``attempt``'s pipeline
        (``root`` is then the ledger's).
    :param sealed_inputs: input name -> partition of the same epoch whose sealed output the job reads
        (resolved through the seal's manifests; e.g. a join after a barrier).
    :param lineage_run: the OpenLineage run of the task that votes (``namespace``, ``job``, ``runId``),
        recorded in the vote as ``lineage_run`` so that the seal names every producer's run.
    :param lineage_dataset: the OpenLineage dataset (``namespace``, ``name``) the partition is known by
        when it is published (its table), recorded in the vote as ``lineage_dataset`` so that a task
        reading the sealed partition names it the same way.
    :param runner: runs the job for an :class:`EpochContext`; returns the manifest, or None to have it
        read from the run directory (a job submitted elsewhere writes it there).
    :raises EpochOutOfOrder: the previous epoch is not sealed (nothing ran).
    :raises AttemptSuperseded: the attempt is not current (nothing ran).
    :raises JobWithoutManifest: the job returned without a manifest (nothing was voted).
    """
    if isinstance(zookeeper, EpochLedger):
        ledger = zookeeper
        if ledger.pipeline != attempt.pipeline:
            raise InvalidInput(f"the ledger is for pipeline {ledger.pipeline!r}, not {attempt.pipeline!r}")
    else:
        ledger = EpochLedger(zookeeper, attempt.pipeline, owner=attempt.owner, root=root)
    # Asked before queueing for the lock (cheap), and again holding it (decisive).
    done = _settled(check_submission(ledger, attempt, partition, producer))
    if done is not None:
        return done
    with ledger.lock(f"write.{partition}", mode="write", timeout=lock_timeout, identifier=attempt.owner):
        decision = check_submission(ledger, attempt, partition, producer)
        done = _settled(decision)
        if done is not None:
            return done
        read = resolved_inputs(ledger, attempt.epoch, inputs, sealed_inputs)
        snapshot = None if decision.snapshot is None else dict(decision.snapshot.pointer)
        if snapshot is not None:  # the job would read it: it must be a sealed run's, under our storage
            check_snapshot_pointer(storage, attempt.pipeline, partition, snapshot)
        context = EpochContext(
            pipeline=attempt.pipeline, partition=partition, producer=producer, epoch=attempt.epoch,
            attempt=attempt.token, config_version=attempt.config_version, run=uuid.uuid4().hex[:16],
            storage=storage, inputs=read.paths, buckets=buckets, snapshot=snapshot,
        )
        location = run_location(storage, attempt.pipeline, partition, attempt.epoch, attempt.token, context.run)
        log.info("epoch %s: running %s/%s (attempt %s, run %s, snapshot from epoch %s)", attempt.epoch, partition,
                 producer, attempt.token, context.run, decision.snapshot.epoch if decision.snapshot else None)
        record = run_for_manifest(runner, context, location, job=repr(partition))
        summary = record.vote_summary()
        if lineage_run:
            summary[LINEAGE_RUN] = {k: str(lineage_run[k]) for k in ("namespace", "job", "runId")}
        if lineage_dataset:
            summary[LINEAGE_DATASET] = {k: str(lineage_dataset[k]) for k in ("namespace", "name")}
        epoch_sealed = False
        def on_retry(exc: BaseException, retry: int, pause: float, left: float) -> None:
            log.warning("epoch %s: vote of %s on %s: %s; trying again in %.1f s", attempt.epoch, producer,
                        partition, describe(exc), pause)

        try:
            # A repeated identical vote is a no-op, so a vote whose answer was lost is simply sent again.
            reads = partition_reads(attempt.pipeline, attempt.epoch, partition, sealed_inputs,
                                    decision.snapshot.epoch if decision.snapshot else None)
            versions = version_reads(attempt.pipeline, partition, read, decision.snapshot)
            result = call_with_retries(
                lambda: ledger.vote(attempt, partition, producer, summary,
                                    snapshot=snapshot_pointer(record, attempt.epoch), upstream=reads or None,
                                    read_versions=versions or None),
                backoff=VOTE_BACKOFF, on_retry=on_retry)
            sealed, epoch_sealed = result.partition_sealed, result.epoch_sealed
        except PartitionAlreadySealed:
            log.info("epoch %s: %s was sealed meanwhile by another attempt; run %s stays invisible",
                     attempt.epoch, partition, context.run)
            sealed = True
        removed = collect_garbage(storage, attempt.pipeline, partition, attempt.epoch,
                                  sealed_runs(ledger, partition, attempt.epoch)) if sealed else []
    return SubmitOutcome("ran", attempt.epoch, partition, producer, summary, sealed, epoch_sealed, context.run,
                         decision.snapshot.epoch if decision.snapshot else None, removed)
