"""Votes of declared producers: staged in ZooKeeper, then cast in epoch order.

A declared producer (an ordinary Airflow task) may finish key k while the epoch of an earlier key is
still incomplete; the ledger opens epoch e only after e-1 is sealed. So a producer's vote is first
*staged*, durably, under the pipeline's ``declared/<epoch>/<partition>/<producer>`` (create-only, with
the task instance that produced it), and then every staged vote is *drained*: from the epoch after
the frontier on, each epoch with staged votes is opened (idempotently, see :func:`_open_for_votes`)
and its staged votes cast, until an epoch stays incomplete. Whoever stages a vote drains, so the
producer that completes key k also casts the staged votes of later keys that were waiting for it.

Each staged vote carries its task instance (dag_id, run_id, task_id, map_index) and is cast with a
request id derived from it: a retried or re-run task instance repeats its vote; nothing is added.
Another run of the producer for a key it already staged is reported (:class:`StageOutcome`):
before the seal the first run's vote stands; after the seal, ``reopen=True`` rolls the key back
(the ledger's recorded rollback) so that every producer's staged vote is cast again under a new
generation, and the seal is delivered again.

Every request goes through the ledger's session (:meth:`PipelineContext.call`): counted, retried within
one deadline, and a create whose answer was lost is found, not reported as another run's. The
``declared`` folder itself is never listed (its children grow with the epochs staged): its data is a
pruning cursor (:class:`StagedPruned`), and the epochs after it are probed by number.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import (
    DuplicateVote,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochOutOfOrder,
    InvalidConfig,
    InvalidInput,
    PartitionAlreadySealed,
)
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.base.steps import Create, SetData
from airflow_epochs.coordination.declared.records import StagedKey, StagedVote
from airflow_epochs.coordination.declared.reruns import record_rerun, succeeded_try
from airflow_epochs.coordination.declared.staging import prune_staged, staged_epoch_path, staged_votes
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.config_store import ensure_path
from airflow_epochs.coordination.wire.config import PipelineConfig
from airflow_epochs.coordination.wire.declared import DeclaredProducers, Match
from airflow_epochs.coordination.wire.events import ProducerRerun
from airflow_epochs.coordination.wire.records import Attempt

# How many epochs one drain opens and votes at most (the rest: the next drain).
MAX_DRAIN_EPOCHS = 1000


@dataclass(frozen=True)
class TaskInstanceId:
    """The task instance a staged vote comes from: its request id, so repeats never add a vote."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}

    def request_id(self, key: str) -> str:
        """A znode-safe request id for this task instance's vote on ``key`` (a digest: ids may be long)."""
        text = json.dumps([self.dag_id, self.run_id, self.task_id, self.map_index, key], separators=(",", ":"))
        return "ti-" + hashlib.sha256(text.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class StageOutcome:
    """What staging one declared producer's vote found.

    ``status``: ``staged`` (new), ``repeat`` (this task instance had staged it: a retry or re-run),
    ``other_run`` (another task instance staged this producer's vote for the key first; before the
    seal: that vote stands), ``rerun_after_seal`` (another run after the key was sealed; nothing
    changed), ``reopened`` (the same, with ``reopen``: the key was rolled back to be sealed again),
    ``resealed`` (the same, with ``reseal``: the key's partition was re-sealed as a new version).
    ``cleared_after``: for a re-run of the same task instance (cleared), the try that had succeeded.
    """

    pipeline: str
    partition: str
    producer: str
    key: str
    epoch: int
    status: str
    staged_by: Mapping[str, Any]
    cleared_after: int | None = None

    def staged_path(self, paths: PipelinePaths) -> str:
        """Where this producer's vote for the key is staged."""
        return f"{staged_epoch_path(paths, self.epoch)}/{self.partition}/{self.producer}"


@dataclass(frozen=True)
class DrainOutcome:
    """Epochs the drain sealed, and the first epoch still waiting for votes (or None)."""

    sealed: tuple[int, ...]
    waiting: int | None


def declaration(ledger: EpochLedger, *, epoch: int | None = None) -> DeclaredProducers:
    """The declared producers in force at ``epoch`` (None: the newest configuration)."""
    version = ledger.config_for(epoch) if epoch is not None else ledger.config_versions()[-1]
    declared = version.config.declared
    if declared is None:
        raise InvalidConfig(f"pipeline {ledger.pipeline!r} declares no producers (configuration v{version.version})")
    return declared


def declaration_mark(ledger: EpochLedger) -> tuple[int, int] | None:
    """What changes whenever the pipeline's declaration may have: the configuration folder's creation
    zxid and child version (a configuration version is added, or the pipeline recreated), from one
    ``exists``; None if the pipeline is absent. Equal marks: the declaration read with the first
    still holds (configuration versions are immutable)."""
    folder = ledger.paths.config_dir
    found = ledger.ctx.call(lambda call: call.exists(folder), what=f"look at {folder}")
    return None if found is None else (int(found.czxid), int(found.cversion))


def stage_vote(
    ledger: EpochLedger, match: Match, task_instance: TaskInstanceId, *, reopen: bool = False, reseal: bool = False,
    try_number: int | None = None,
) -> StageOutcome:
    """Stage ``match``'s vote (durably, create-only) for the epoch of its key; see the module. With
    ``reseal``, a re-run after the seal re-seals the key's partition as a new version instead of rolling
    back (:func:`_reseal_key`): only what read it is re-produced, and no later epoch is undone.

    :param try_number: the task instance's try: a try later than one that reported success after
        staging (:func:`~.declared_reruns.mark_succeeded`) is a cleared re-run, not a retry.
    """
    reopen = reopen or reseal
    validate_name("partition", match.partition)
    validate_name("producer", match.producer)
    epoch = declaration(ledger).keys.epoch_of(match.key)
    config = ledger.config_for(epoch).config
    _check_declared_at(config, match, epoch)
    doc = StagedVote(task_instance.to_json(), match.key, task_instance.request_id(match.key))
    epoch_path = staged_epoch_path(ledger.paths, epoch)
    path = f"{epoch_path}/{match.partition}/{match.producer}"
    if not _exists(ledger, path) and _sealed(ledger, epoch):
        # sealed, and its staged votes pruned with retention: a re-run of a long-sealed key
        return _outcome(ledger, match, epoch, "rerun_after_seal", None)
    staged = _stage(ledger, epoch_path, path, match, epoch, doc)
    if staged is None:
        return _outcome(ledger, match, epoch, "staged", doc)
    existing, version = staged
    if existing.task_instance == doc.task_instance:
        succeeded = succeeded_try(ledger, path, doc.task_instance) if try_number is not None else None
        if succeeded is not None and try_number is not None and try_number > succeeded and _sealed(ledger, epoch):
            # a later try after this task instance's success: cleared (airflow tasks clear), a re-run
            rerun = f"{doc.request}-t{succeeded}"
            record_rerun(ledger, path, rerun, ProducerRerun(
                epoch=epoch, partition=match.partition, producer=match.producer, key=match.key,
                task_instance=dict(doc.task_instance), cleared=True, succeeded_try=succeeded,
                try_number=try_number, reopened=reopen))
            if not reopen:
                return _outcome(ledger, match, epoch, "rerun_after_seal", existing, cleared=succeeded)
            return _rerun(ledger, match, task_instance, epoch, doc, reseal=reseal, rerun=rerun, cleared=succeeded)
        if reopen and _sealed(ledger, epoch) and _sealed_without(ledger, epoch, match, doc):
            # this re-run replaced the staged vote, then stopped before its rollback (or re-seal): finish it
            return _rerun(ledger, match, task_instance, epoch, doc, reseal=reseal)
        return _outcome(ledger, match, epoch, "repeat", existing)
    if not _sealed(ledger, epoch):
        return _outcome(ledger, match, epoch, "other_run", existing)
    replaced = reopen and _replace(ledger, path, doc, version)  # False: another re-run replaced it first
    record_rerun(ledger, path, f"{doc.request}-reopened" if replaced else doc.request, ProducerRerun(
        epoch=epoch, partition=match.partition, producer=match.producer, key=match.key,
        task_instance=dict(doc.task_instance), try_number=try_number or 0, reopened=replaced))
    if not replaced:
        return _outcome(ledger, match, epoch, "rerun_after_seal", existing)
    return _rerun(ledger, match, task_instance, epoch, doc, reseal=reseal)


def _rerun(ledger: EpochLedger, match: Match, task_instance: TaskInstanceId, epoch: int, doc: StagedVote, *,
           reseal: bool, rerun: str | None = None, cleared: int | None = None) -> StageOutcome:
    """Reopen (or re-seal) the key for a re-run; ``rerun`` names a cleared re-run (its request ids)."""
    if reseal:
        _reseal_key(ledger, match, task_instance, epoch, doc, rerun=rerun)
        return _outcome(ledger, match, epoch, "resealed", doc, cleared=cleared)
    _reopen(ledger, match, task_instance, epoch, doc, request=f"rb-{rerun}" if rerun else None)
    return _outcome(ledger, match, epoch, "reopened", doc, cleared=cleared)


def _reseal_key(ledger: EpochLedger, match: Match, task_instance: TaskInstanceId, epoch: int,
                doc: StagedVote, *, rerun: str | None = None) -> None:
    """Re-seal the key's partition as a new version and cast every producer's staged vote under it (this
    re-run's, and the others' as they stand); once per re-run (its request ids)."""
    asked = ledger.corrections.reseal(epoch, match.partition, request_id=f"rs-{rerun or doc.request}",
                          reason=f"declared producer {match.producer!r} ran again for key {match.key!r} "
                                 f"({task_instance.dag_id}/{task_instance.run_id})")
    if asked.state != "open":
        return
    for partition, producer, staged in staged_votes(ledger, epoch):
        if partition == match.partition:
            ledger.corrections.vote_version(epoch, partition, asked.version, producer, staged.vote(),
                                request_id=f"v{asked.version}-{staged.request}")


def _exists(ledger: EpochLedger, path: str) -> bool:
    return bool(ledger.ctx.call(lambda call: call.exists(path) is not None, what=f"look for {path}"))


def _stage(ledger: EpochLedger, epoch_path: str, path: str, match: Match, epoch: int,
           doc: StagedVote) -> tuple[StagedVote, int] | None:
    """Create the staged vote (and its epoch's node); None if this call created it, else the staged
    vote already there and its version."""

    def body(call: Call) -> tuple[StagedVote, int] | None:
        _ensure_epoch_node(call, epoch_path, match.key, epoch)
        ensure_path(call, f"{epoch_path}/{match.partition}")
        failure = call.try_commit([Create(path, doc.to_bytes())])
        if failure is None:
            return None
        if not isinstance(failure.error, NodeExistsError):
            raise failure.error
        raw = call.get(path)
        if raw is None:
            raise Conflict()  # pruned meanwhile: decide again
        existing = StagedVote.from_bytes(raw.data, path=path)
        if (call.sent or call.wrote) and int(raw.stat.version) == 0 and existing == doc:
            return None  # this call's own create, whose answer was lost
        return existing, int(raw.stat.version)

    return ledger.ctx.call(body, what=f"stage the vote of {match.producer!r} for {match.partition!r} at epoch {epoch}")


def _replace(ledger: EpochLedger, path: str, doc: StagedVote, version: int) -> bool:
    """Replace the staged vote at ``version`` with ``doc``; False if another writer changed it first."""

    def body(call: Call) -> bool:
        failure = call.try_commit([SetData(path, doc.to_bytes(), version)])
        if failure is None:
            return True
        if isinstance(failure.error, BadVersionError):
            return False
        raise failure.error

    def find(call: Call) -> bool | None:  # after a lost answer: did this replacement commit?
        raw = call.get(path)
        return True if raw is not None and int(raw.stat.version) == version + 1 and raw.data == doc.to_bytes() else None

    return bool(ledger.ctx.call(body, what=f"replace the staged vote {path}", find=find))


def _reopen(ledger: EpochLedger, match: Match, task_instance: TaskInstanceId, epoch: int,
            doc: StagedVote, *, request: str | None = None) -> None:
    """Roll the key's epoch (and every later one) back; the drain seals them again from the staged votes."""
    ledger.rollback(epoch - 1, reason=f"declared producer {match.producer!r} of {match.partition!r} ran again for "
                                      f"key {match.key!r} ({task_instance.dag_id}/{task_instance.run_id})",
                    request_id=request or f"rb-{doc.request}")


def _sealed_without(ledger: EpochLedger, epoch: int, match: Match, doc: StagedVote) -> bool:
    """Whether the epoch's newest seal (version) holds another task instance's vote for this producer than
    ``doc``'s."""
    seal = ledger.corrections.sealed_version(epoch, match.partition)
    if seal is None:
        return False
    manifest = seal.manifests.get(match.producer)
    return StagedVote.voted_by(manifest) != doc.task_instance


def drain(ledger: EpochLedger, *, max_epochs: int = MAX_DRAIN_EPOCHS) -> DrainOutcome:
    """Cast staged votes in epoch order from the epoch after the frontier, until one stays incomplete."""
    sealed: list[int] = []
    epoch = ledger.frontier() + 1
    for _ in range(max_epochs):
        votes = staged_votes(ledger, epoch)
        if not votes:
            return DrainOutcome(tuple(sealed), None)
        attempt = _open_for_votes(ledger, epoch)
        if attempt is not None:
            for partition, producer, staged in votes:
                try:
                    ledger.vote(attempt, partition, producer, staged.vote(), request_id=staged.request)
                except (PartitionAlreadySealed, EpochAlreadySealed):
                    break
                except DuplicateVote:
                    continue  # an earlier staging of this producer was cast: it stands
        info = ledger.epoch_info(epoch)
        if info is None or info.state != "sealed":
            return DrainOutcome(tuple(sealed), epoch)
        sealed.append(epoch)
        epoch += 1
        if len(sealed) == 1:
            prune_staged(ledger)
    return DrainOutcome(tuple(sealed), epoch)


def _open_for_votes(ledger: EpochLedger, epoch: int) -> Attempt | None:
    """The running attempt of ``epoch``, opened if needed (None: sealed meanwhile, or not next yet).

    Every drainer opens with the same request id for the same opening (epoch, generation and the
    attempt it replaces), so drainers racing on the same owner get the same attempt, not a new one
    that would fence off votes cast under the first.
    """
    info = ledger.epoch_info(epoch)
    if info is not None and info.state == "sealed":
        return None
    if info is not None and info.state == "open" and info.attempt_state == "running":
        return ledger.current_attempt(epoch)
    if info is None:
        request = f"declared-open-{epoch}-g1"
    elif info.state == "rolled_back":
        request = f"declared-open-{epoch}-g{info.generation + 1}"
    else:
        request = f"declared-open-{epoch}-g{info.generation}-after-{info.attempt}"
    try:
        return ledger.open_epoch(epoch, request_id=request)
    except EpochAlreadyOpen:
        return ledger.current_attempt(epoch)
    except (EpochOutOfOrder, EpochAlreadySealed):
        return None


def _ensure_epoch_node(call: Call, path: str, key: str, epoch: int) -> None:
    ensure_path(call, path.rsplit("/", 1)[0])
    failure = call.try_commit([Create(path, StagedKey(key).to_bytes())])
    if failure is None:
        return
    if not isinstance(failure.error, NodeExistsError):
        raise failure.error
    raw = call.get(path)
    if raw is None:
        raise Conflict()  # pruned meanwhile: decide again
    there = StagedKey.from_bytes(raw.data, path=path).partition_key if raw.data else None
    if there != key:
        raise InvalidInput(f"partition key {key!r} maps to epoch {epoch}, which key {there!r} already holds; "
                           "the key map must give every key its own epoch")


def _check_declared_at(config: PipelineConfig, match: Match, epoch: int) -> None:
    if match.producer not in config.partitions.get(match.partition, ()):
        raise InvalidInput(f"producer {match.producer!r} of partition {match.partition!r} is not in the "
                           f"configuration in force at epoch {epoch} (key {match.key!r})")


def _sealed(ledger: EpochLedger, epoch: int) -> bool:
    info = ledger.epoch_info(epoch)
    return info is not None and info.state == "sealed"


def _outcome(ledger: EpochLedger, match: Match, epoch: int, status: str, doc: StagedVote | None, *,
             cleared: int | None = None) -> StageOutcome:
    return StageOutcome(ledger.pipeline, match.partition, match.producer, match.key, epoch, status,
                        {} if doc is None else doc.to_json(), cleared)
