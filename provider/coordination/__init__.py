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
    acknowledge,
    consumers,
    register_consumer,
    unregister_consumer,
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
from airflow_epochs.coordination.recipes.leadership import LeaderLease, LeaseHolder
from airflow_epochs.coordination.recipes.lineage import LineageItem, LineageReport, check_consistency, lineage_of
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
from airflow_epochs.coordination.state.reader import PipelineReader
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
    "PartitionNotSealed",
    "PayloadTooLarge",
    "PipelineConfig",
    "PipelineExists",
    "PipelineNotFound",
    "PipelinePaths",
    "PipelineReader",
    "RetiredScope",
    "RetryableError",
    "RollbackRefused",
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
