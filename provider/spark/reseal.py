"""Re-produce one producer's part of a re-sealed (epoch, partition) with its Spark job, and vote it under
the version (no Airflow import).

The job runs as it ran for the original seal, with three differences: its inputs of the same epoch
(``sealed_inputs``) and the snapshot it starts from are the *newest* sealed versions (so a correction
flows through), it writes a new run folder of the original attempt (the original seal's runs stay
readable as version 1), and its vote goes to ``EpochLedger.vote_version``, naming what it read in the
lineage vector (and the versions it read in ``read_versions``) as
:func:`~airflow_epochs.spark.submit.submit_and_seal` does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_epochs.coordination.base.errors import PartitionNotSealed
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.recipes.corrections.records import Reseal, VersionVoteResult
from airflow_epochs.spark.context import EpochContext
from airflow_epochs.spark.run_paths import check_snapshot_pointer
from airflow_epochs.spark.storage import run_location
from airflow_epochs.spark.submit import (
    partition_reads,
    resolved_inputs,
    run_for_manifest,
    snapshot_pointer,
    version_reads,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResubmitOutcome:
    """What :func:`resubmit_version` did: the run it made and the answer of its vote."""

    run: str
    snapshot_epoch: int | None
    vote: VersionVoteResult


def resubmit_version(
    ledger: EpochLedger,
    reseal: Reseal,
    producer: str,
    *,
    storage: str,
    runner: Callable[[EpochContext], Mapping[str, Any] | None],
    inputs: Mapping[str, str] | None = None,
    sealed_inputs: Mapping[str, str] | None = None,
) -> ResubmitOutcome:
    """Run ``producer``'s job for the open version ``reseal`` (from ``ledger.reseal`` or
    ``ledger.corrections.pending()``) and vote its manifest under that version.

    :param inputs: named input locations (a corrected input goes here).
    :param sealed_inputs: input name -> partition of the same epoch read through its newest sealed version.
    :raises PartitionNotSealed: the (epoch, partition) has no original seal.
    :raises JobWithoutManifest: the job ended without a manifest of this run (nothing was voted).
    """
    epoch, partition = reseal.epoch, reseal.partition
    first = ledger.corrections.sealed_version(epoch, partition, 1)
    if first is None:
        raise PartitionNotSealed(f"pipeline {ledger.pipeline!r}: {partition!r} is not sealed at epoch {epoch}")
    read = resolved_inputs(ledger, epoch, inputs, sealed_inputs)
    ref = ledger.last_sealed_snapshot(partition, before_epoch=epoch, producer=producer)
    snapshot = None if ref is None else dict(ref.pointer)
    if snapshot is not None:
        check_snapshot_pointer(storage, ledger.pipeline, partition, snapshot)
    context = EpochContext(
        pipeline=ledger.pipeline, partition=partition, producer=producer, epoch=epoch, attempt=first.attempt,
        config_version=ledger.config_for(epoch).version, run=uuid.uuid4().hex[:16], storage=storage,
        inputs=read.paths, snapshot=snapshot)
    location = run_location(storage, ledger.pipeline, partition, epoch, first.attempt, context.run)
    log.info("epoch %s: re-producing %s/%s as version %s (run %s, snapshot from epoch %s)", epoch, partition,
             producer, reseal.version, context.run, None if ref is None else ref.epoch)
    record = run_for_manifest(runner, context, location, job=f"{partition!r} version {reseal.version}")
    reads = partition_reads(ledger.pipeline, epoch, partition, sealed_inputs, None if ref is None else ref.epoch)
    versions = version_reads(ledger.pipeline, partition, read, ref)
    vote = ledger.corrections.vote_version(epoch, partition, reseal.version, producer, record.vote_summary(),
                                           snapshot=snapshot_pointer(record, epoch), upstream=reads or None,
                                           read_versions=versions or None, request_id=f"resubmit-{context.run}")
    return ResubmitOutcome(context.run, None if ref is None else ref.epoch, vote)
