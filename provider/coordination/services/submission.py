"""Ordered submission (promise 2): may a producer's job for an epoch be submitted now, and from what state.

A submitter (the Spark operator, a script) asks before it starts any job. The answer is one of:
``submit`` (with the snapshot to start from), ``voted`` (this attempt already holds the producer's
vote, e.g. the task died after voting: nothing to run again) or ``sealed`` (the partition is sealed;
any new output would be invisible). Submitting epoch e before e-1 is sealed, or under a superseded
attempt, is refused with a specific error before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from airflow_epochs.coordination.base.errors import AttemptSuperseded, EpochAlreadySealed, EpochOutOfOrder
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.seals import producers_of
from airflow_epochs.coordination.wire.records import Attempt, SealInfo, SnapshotRef, VoteRecord


@dataclass(frozen=True)
class SubmitDecision:
    """What :func:`check_submission` decided; ``snapshot`` is the last sealed one before the epoch."""

    action: Literal["submit", "voted", "sealed"]
    attempt: Attempt
    partition: str
    producer: str
    snapshot: SnapshotRef | None = None
    vote: VoteRecord | None = None
    seal: SealInfo | None = None

    @property
    def manifest(self) -> Mapping[str, Any] | None:
        """The manifest already recorded for this producer (``voted`` or ``sealed``), if any."""
        if self.vote is not None:
            return dict(self.vote.manifest)
        if self.seal is not None and self.producer in self.seal.manifests:
            return dict(self.seal.manifests[self.producer])
        return None


def check_submission(ledger: EpochLedger, attempt: Attempt, partition: str, producer: str) -> SubmitDecision:
    """Decide whether ``producer`` may submit its job for ``partition`` under ``attempt``.

    :raises EpochOutOfOrder: epoch e-1 is not sealed yet.
    :raises AttemptSuperseded: another attempt of the epoch is current (or this one was aborted).
    :raises UnknownPartition, UnknownProducer: not in the epoch's configuration.
    """
    validate_name("partition", partition)
    validate_name("producer", producer)
    frontier = ledger.frontier()
    if frontier < attempt.epoch - 1:
        raise EpochOutOfOrder(
            f"pipeline {ledger.pipeline!r}: refusing to submit epoch {attempt.epoch} for {partition!r}: "
            f"epoch {attempt.epoch - 1} is not sealed (frontier {frontier}); nothing was submitted"
        )
    producers_of(ledger.config_for(attempt.epoch), ledger.pipeline, attempt.epoch, partition, producer)
    seal = ledger.seal(attempt.epoch, partition)
    if seal is not None:
        return SubmitDecision("sealed", attempt, partition, producer, seal=seal)
    info = ledger.epoch_info(attempt.epoch)
    if info is None or info.state != "open":
        raise EpochAlreadySealed(f"pipeline {ledger.pipeline!r}: epoch {attempt.epoch} is "
                                 f"{info.state if info else 'not opened'}; nothing was submitted")
    if info.attempt != attempt.token or info.generation != attempt.generation or info.attempt_state != "running":
        raise AttemptSuperseded(
            f"pipeline {ledger.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is no longer current "
            f"(attempt {info.attempt} {info.attempt_state} by {info.owner!r}); nothing was submitted",
            attempt=attempt.token, current=info.attempt,
        )
    vote = ledger.vote_of(attempt.epoch, partition, producer)
    if vote is not None and vote.attempt == attempt.token:
        return SubmitDecision("voted", attempt, partition, producer, vote=vote)
    snapshot = ledger.last_sealed_snapshot(partition, before_epoch=attempt.epoch, producer=producer)
    return SubmitDecision("submit", attempt, partition, producer, snapshot=snapshot)
