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

Layout, lowest layer first (a module imports from its own layer and those below; this index
re-exports the public names of every layer, and no module of the core imports it):

- ``base``: errors, names, paths, transaction steps, the session and its calls, retries, ACLs;
- ``wire``: the records kept in znodes and their encodings (the one place a payload is decoded);
- ``state``: the pipeline context and the reads of a pipeline's state (reader, snapshots, history,
  archive);
- ``protocol``: the protocol's writes (opening, votes, seals, closing, aborts, rollbacks, the
  configuration, retention, delivery scopes);
- ``recipes``: barriers, leadership, locks, backpressure, asset delivery, lineage;
- the face, :class:`EpochLedger` (``ledger.py``): one handle per pipeline over all of the above;
- ``services``: what is built on ledgers (the coordinator, submission checks, reconfiguration,
  declared votes, module-level shortcuts).

One calling convention below the face: a function that asks ZooKeeper about a pipeline takes
``(call, ctx, ...)`` when it is a step of a caller's call (the caller owns the deadline, the retries
and the finding of a lost answer, and can put several steps into one transaction), and ``(ctx, ...)``
when it is a whole operation, which runs its own call through ``ctx.call``. The context always
comes with the pipeline, its paths, its session and its clock, so no function takes a client and
paths apart. Functions that ask nothing of ZooKeeper take their values; the face and the services
take a ledger. ``base`` lies below the context, so its ZooKeeper tools (the ACL checks the command
line runs before it has a pipeline's context) take a started client.
"""

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
from airflow_epochs.coordination.base.reseal_errors import (
    InputsNotResealed,
    ResealCompacted,
    ResealInFlight,
    ResealNotSealed,
    ResealRefused,
    ResealUnknownPartition,
    VersionNotOpen,
)
from airflow_epochs.coordination.base.session import Session, new_request_id
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.aborts import AbortResult
from airflow_epochs.coordination.protocol.delivery_scopes import (
    DeliveryScopeHeld,
    RetiredScope,
    UnknownDeliveryScope,
    retire_delivery_scope,
)
from airflow_epochs.coordination.protocol.pipelined_votes import Ballot
from airflow_epochs.coordination.protocol.retention import CompactionReport
from airflow_epochs.coordination.recipes.backpressure import (
    ConsumerState,
    TooManyConsumers,
    UnknownConsumer,
)
from airflow_epochs.coordination.recipes.barriers import (
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
from airflow_epochs.coordination.recipes.deadlines import PartitionDeadlines, Verdict
from airflow_epochs.coordination.recipes.leadership import LeaderLease, LeaseHolder
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
from airflow_epochs.coordination.services.shortcuts import (
    acknowledge,
    consumers,
    lineage_of,
    register_consumer,
    unregister_consumer,
)
from airflow_epochs.coordination.services.submission import SubmitDecision, check_submission
from airflow_epochs.coordination.state.pipeline_reader import PipelineReader
from airflow_epochs.coordination.state.versions import VersionView
from airflow_epochs.coordination.wire.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.wire.deadline_records import DeadlineSpec, LateAlert, ProducerForecast, SealForecast
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
from airflow_epochs.coordination.wire.versions import CorrectionNode, Reseal, VersionEntry, VersionVoteResult, read_key

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
    "acknowledge",
    "assignment",
    "bucket_of",
    "check_consistency",
    "check_submission",
    "consumers",
    "lineage_of",
    "new_request_id",
    "open_as_leader",
    "plan_migration",
    "register_consumer",
    "repair_pipeline_acls",
    "resource_lock",
    "retire_delivery_scope",
    "schedule_migration",
    "unregister_consumer",
    "validate_epoch",
    "validate_name",
    "validate_root",
    "verify_pipeline_acls",
]
# Re-seals: versions of a sealed (epoch, partition) and the corrections they start.
__all__ += ["CorrectionNode", "InputsNotResealed", "Reseal", "ResealCompacted", "ResealInFlight", "ResealNotSealed",
            "ResealRefused", "ResealUnknownPartition", "VersionEntry", "VersionNotOpen", "VersionView",
            "VersionVoteResult", "read_key"]
