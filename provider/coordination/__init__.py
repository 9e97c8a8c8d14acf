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

from airflow_epochs.coordination.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.errors import (
    AttemptSuperseded,
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
    PartitionAlreadySealed,
    PayloadTooLarge,
    PipelineExists,
    PipelineNotFound,
    RollbackRefused,
    SessionLost,
    StateError,
    UnknownPartition,
    UnknownProducer,
)
from airflow_epochs.coordination.leadership import LeaderLease, LeaseHolder
from airflow_epochs.coordination.ledger import (
    Attempt,
    EpochInfo,
    EpochLedger,
    Event,
    SealInfo,
    SnapshotRef,
    VoteResult,
)
from airflow_epochs.coordination.locks import resource_lock
from airflow_epochs.coordination.names import validate_epoch, validate_name
from airflow_epochs.coordination.paths import DEFAULT_ROOT, PipelinePaths
from airflow_epochs.coordination.session import Session

__all__ = [
    "DEFAULT_ROOT",
    "Attempt",
    "AttemptSuperseded",
    "ConfigConflict",
    "ConfigVersion",
    "ContentionExhausted",
    "CoordinationUnavailable",
    "CorruptPayload",
    "DuplicateVote",
    "EpochAlreadyOpen",
    "EpochAlreadySealed",
    "EpochIncomplete",
    "EpochInfo",
    "EpochLedger",
    "EpochNotOpen",
    "EpochOutOfOrder",
    "EpochsError",
    "Event",
    "InvalidConfig",
    "InvalidEpoch",
    "InvalidInput",
    "InvalidName",
    "LeaderLease",
    "LeaseHolder",
    "LockTimeout",
    "NotLeader",
    "PartitionAlreadySealed",
    "PayloadTooLarge",
    "PipelineConfig",
    "PipelineExists",
    "PipelineNotFound",
    "PipelinePaths",
    "RollbackRefused",
    "SealInfo",
    "Session",
    "SessionLost",
    "SnapshotRef",
    "StateError",
    "UnknownPartition",
    "UnknownProducer",
    "VoteResult",
    "resource_lock",
    "validate_epoch",
    "validate_name",
]
