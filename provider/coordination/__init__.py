"""The epoch protocol over kazoo, with no Airflow import: usable from a script, a task or a Spark driver.

Typical use::

    from kazoo.client import KazooClient
    from airflow_epochs.coordination import EpochLedger, PipelineConfig

    zk = KazooClient(hosts="127.0.0.1:2181"); zk.start()
    ledger = EpochLedger(zk, "sales", owner="deploy-a")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "orders", "ingest", {"rows": 42})   # last vote: seals partition and epoch
    assert ledger.frontier() == 1

Layout: a kernel, the recipe families above it, the face, and what takes a ledger (this index
re-exports the public names of all of them, and no module of the core imports it):

- the kernel, lowest layer first (a module imports from its own layer and those below, never a
  family): ``base`` (errors, names, paths, transaction steps, the session and its calls, retries,
  ACLs), ``wire`` (the epoch's records and their encodings), ``state`` (the pipeline context and
  the reads of a pipeline's state: reader, snapshots, history, archive), ``protocol`` (the epoch
  itself: opening, votes, seals, closing, aborts, rollbacks, the configuration, retention);
- ``recipes``: one folder a family, each owning its records, paths, reads, writes and async watch
  (``barriers``, ``leadership``, ``backpressure``, ``delivery``, ``deadlines``, ``corrections``), and
  small one-module recipes beside them (``locks``, ``waits``, ``lineage``); a family imports the
  kernel and only the families it names;
- the face, :class:`EpochLedger` (``ledger.py``): one handle per pipeline, one binding line a family;
- ``declared`` and ``services``: what is built on ledgers (declared producers' votes; the
  coordinator, submission checks, reconfiguration).

One calling convention below the face: a function that asks ZooKeeper about a pipeline takes
``(call, ctx, ...)`` when it is a step of a caller's call (the caller owns the deadline, the retries
and the finding of a lost answer, and can put several steps into one transaction), and ``(ctx, ...)``
when it is a whole operation, which runs its own call through ``ctx.call``. The context always
comes with the pipeline, its paths, its session and its clock, so no function takes a client and
paths apart. Functions that ask nothing of ZooKeeper take their values; the face and the services
take a ledger. ``base`` lies below the context, so its ZooKeeper tools (the ACL checks the command
line runs before it has a pipeline's context) take a started client.
"""

from typing import Any

from airflow_epochs.coordination import deprecated as _deprecated
from airflow_epochs.coordination.base.acl import InsecureAcl, repair_pipeline_acls, verify_pipeline_acls
from airflow_epochs.coordination.base.calendar import Calendar, CronEpochCalendar, EpochCalendar
from airflow_epochs.coordination.base.errors import (
    AccessDenied,
    AttemptSuperseded,
    Backpressured,
    CallUnfinished,
    ConfigConflict,
    ContentionExhausted,
    CoordinationUnavailable,
    CorruptPayload,
    DuplicateVote,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochIncomplete,
    EpochNotOpen,
    EpochOutOfOrder,
    EpochsError,
    InvalidConfig,
    InvalidEpoch,
    InvalidInput,
    InvalidName,
    LockTimeout,
    NotLeader,
    OutcomeUnknown,
    PartitionAlreadySealed,
    PartitionNotSealed,
    PayloadTooLarge,
    PipelineExists,
    PipelineNotFound,
    RetryableError,
    RollbackRefused,
    SessionLost,
    SnapshotHistoryUnavailable,
    StateError,
    TooManyAttempts,
    TooManyRequests,
    UnknownPartition,
    UnknownProducer,
)
from airflow_epochs.coordination.base.names import validate_epoch, validate_name, validate_root
from airflow_epochs.coordination.base.paths import DEFAULT_ROOT, PipelinePaths
from airflow_epochs.coordination.base.session import Session, new_request_id
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.aborts import AbortResult
from airflow_epochs.coordination.protocol.pipelined_votes import Ballot
from airflow_epochs.coordination.protocol.retention import CompactionReport
from airflow_epochs.coordination.recipes.backpressure.consumers import (
    ConsumerState,
    TooManyConsumers,
    UnknownConsumer,
)
from airflow_epochs.coordination.recipes.barriers.barrier import (
    Arrival,
    Barrier,
    BarrierClosed,
    BarrierConflict,
    BarrierError,
    BarrierFailed,
    BarrierFull,
    BarrierNotDeclared,
    BarrierOutcome,
    StragglerPolicy,
    UnknownParticipant,
)
from airflow_epochs.coordination.recipes.corrections.errors import (
    InputsNotResealed,
    ResealCompacted,
    ResealInFlight,
    ResealNotSealed,
    ResealRefused,
    ResealUnknownPartition,
    VersionNotOpen,
)
from airflow_epochs.coordination.recipes.corrections.records import (
    CorrectionNode,
    Reseal,
    VersionEntry,
    VersionVoteResult,
    read_key,
)
from airflow_epochs.coordination.recipes.corrections.versions import VersionView
from airflow_epochs.coordination.recipes.deadlines.deadlines import PartitionDeadlines, Verdict
from airflow_epochs.coordination.recipes.deadlines.records import (
    DeadlineSpec,
    LateAlert,
    ProducerForecast,
    SealForecast,
)
from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent
from airflow_epochs.coordination.recipes.delivery.scopes import (
    DeliveryScopeHeld,
    RetiredScope,
    UnknownDeliveryScope,
    retire_delivery_scope,
)
from airflow_epochs.coordination.recipes.leadership.lease import LeaderLease, LeaseHolder
from airflow_epochs.coordination.recipes.lineage import LineageItem, LineageReport, check_consistency
from airflow_epochs.coordination.recipes.locks import resource_lock
from airflow_epochs.coordination.services.coordinator import OpenDecision, open_as_leader
from airflow_epochs.coordination.services.reconfig import (
    BucketAssignment,
    assignment,
    bucket_of,
    plan_migration,
    schedule_migration,
)
from airflow_epochs.coordination.services.submission import SubmitDecision, check_submission
from airflow_epochs.coordination.state.pipeline_reader import PipelineReader
from airflow_epochs.coordination.wire.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.wire.records import (
    Attempt,
    EpochInfo,
    Event,
    Overtaken,
    SealInfo,
    SealRecord,
    SnapshotRef,
    VoteRecord,
    VoteResult,
)

__all__ = [
    "DEFAULT_ROOT",
    "AbortResult",
    "AccessDenied",
    "Arrival",
    "Attempt",
    "AttemptSuperseded",
    "Backpressured",
    "Ballot",
    "Barrier",
    "BarrierClosed",
    "BarrierConflict",
    "BarrierError",
    "BarrierFailed",
    "BarrierFull",
    "BarrierNotDeclared",
    "BarrierOutcome",
    "BucketAssignment",
    "Calendar",
    "CallUnfinished",
    "CompactionReport",
    "ConfigConflict",
    "ConfigVersion",
    "ConsumerState",
    "ContentionExhausted",
    "CoordinationUnavailable",
    "CorruptPayload",
    "CronEpochCalendar",
    "DeadlineSpec",
    "DeliveryScopeHeld",
    "DuplicateVote",
    "EpochAlreadyOpen",
    "EpochAlreadySealed",
    "EpochCalendar",
    "EpochIncomplete",
    "EpochInfo",
    "EpochLedger",
    "EpochNotOpen",
    "EpochOutOfOrder",
    "EpochsError",
    "Event",
    "InsecureAcl",
    "InvalidConfig",
    "InvalidEpoch",
    "InvalidInput",
    "InvalidName",
    "LateAlert",
    "LeaderLease",
    "LeaseHolder",
    "LineageItem",
    "LineageReport",
    "LockTimeout",
    "NotLeader",
    "OpenDecision",
    "OutcomeUnknown",
    "Overtaken",
    "PartitionAlreadySealed",
    "PartitionDeadlines",
    "PartitionNotSealed",
    "PayloadTooLarge",
    "PipelineConfig",
    "PipelineExists",
    "PipelineNotFound",
    "PipelinePaths",
    "PipelineReader",
    "ProducerForecast",
    "RetiredScope",
    "RetryableError",
    "RollbackRefused",
    "SealForecast",
    "SealInfo",
    "SealRecord",
    "SealedPartitionEvent",
    "Session",
    "SessionLost",
    "SnapshotHistoryUnavailable",
    "SnapshotRef",
    "StateError",
    "StragglerPolicy",
    "SubmitDecision",
    "TooManyAttempts",
    "TooManyConsumers",
    "TooManyRequests",
    "UnknownConsumer",
    "UnknownDeliveryScope",
    "UnknownParticipant",
    "UnknownPartition",
    "UnknownProducer",
    "Verdict",
    "VoteRecord",
    "VoteResult",
    "assignment",
    "bucket_of",
    "check_consistency",
    "check_submission",
    "new_request_id",
    "open_as_leader",
    "plan_migration",
    "repair_pipeline_acls",
    "resource_lock",
    "retire_delivery_scope",
    "schedule_migration",
    "validate_epoch",
    "validate_name",
    "validate_root",
    "verify_pipeline_acls",
]
# Re-seals: versions of a sealed (epoch, partition) and the corrections they start.
__all__ += ["CorrectionNode", "InputsNotResealed", "Reseal", "ResealCompacted", "ResealInFlight", "ResealNotSealed",
            "ResealRefused", "ResealUnknownPartition", "VersionEntry", "VersionNotOpen", "VersionView",
            "VersionVoteResult", "read_key"]

# Old module paths and names keep working and warn (:mod:`.deprecated`; the changelog lists them).
_deprecated.install()


def __getattr__(name: str) -> Any:
    if name in _deprecated.SHORTCUTS:
        return getattr(_deprecated, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
