"""Exceptions raised by the coordination core.

Every refusal has its own class, so callers (operators, sensors, scripts) can react to the exact
reason, and every message names the offending value.
"""

from __future__ import annotations


class EpochsError(Exception):
    """Base class of every error raised by :mod:`airflow_epochs.coordination`."""


# -- bad input: raised before anything is written ---------------------------------------------


class InvalidInput(EpochsError, ValueError):
    """An argument is malformed; nothing was written."""


class InvalidName(InvalidInput):
    """A name that would become a znode path segment is not acceptable."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {kind} name {value!r}: {reason}")


class InvalidEpoch(InvalidInput):
    """An epoch number is not a positive integer."""


class InvalidConfig(InvalidInput):
    """A pipeline configuration is malformed."""


class PayloadTooLarge(InvalidInput):
    """A payload would exceed the safe znode size."""


class CorruptPayload(EpochsError):
    """A znode holds data that does not match the schema this version reads."""


# -- state refusals: the request is well formed but the ledger says no ------------------------


class StateError(EpochsError):
    """The request conflicts with the state recorded in ZooKeeper; nothing was written."""


class PipelineNotFound(StateError):
    """The pipeline has not been created."""


class PipelineExists(StateError):
    """The pipeline exists already with another configuration."""


class EpochOutOfOrder(StateError):
    """Epoch e was asked for while e-1 is not sealed (or e is not the next epoch)."""


class EpochNotOpen(StateError):
    """The epoch has not been opened (or was rolled back and not reopened)."""


class EpochAlreadyOpen(StateError):
    """Another owner holds a running attempt on the epoch."""

    def __init__(self, message: str, *, owner: str, attempt: int) -> None:
        self.owner = owner
        self.attempt = attempt
        super().__init__(message)


class EpochAlreadySealed(StateError):
    """The epoch is sealed; it can change only through a recorded rollback."""


class EpochIncomplete(StateError):
    """The epoch cannot be closed: some of its partitions are not sealed yet."""

    def __init__(self, message: str, *, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(message)


class AttemptSuperseded(StateError):
    """The attempt's fencing token is no longer current (a zombie) or the attempt was aborted."""

    def __init__(self, message: str, *, attempt: int, current: int) -> None:
        self.attempt = attempt
        self.current = current
        super().__init__(message)


class UnknownPartition(StateError):
    """The partition is not part of the configuration in force at that epoch."""


class UnknownProducer(StateError):
    """The producer is not registered for the partition at that epoch."""


class DuplicateVote(StateError):
    """The producer already voted for this attempt with a different manifest."""


class PartitionNotSealed(StateError):
    """A reader asked for a partition at an epoch that is not sealed: its output is not visible."""


class PartitionAlreadySealed(StateError):
    """The partition is sealed by another attempt or with another manifest."""


class ConfigConflict(StateError):
    """A configuration change names an epoch that is already open or sealed."""


class RollbackRefused(StateError):
    """The rollback target is not a sealed epoch that can be rolled back to."""


class Backpressured(StateError):
    """Opening the epoch would run more than the window ahead of the slowest consumer."""

    def __init__(self, message: str, *, consumer: str, acked: int, window: int) -> None:
        self.consumer = consumer
        self.acked = acked
        self.window = window
        super().__init__(message)


class NotLeader(StateError):
    """Another owner holds the pipeline's leadership lease."""

    def __init__(self, message: str, *, holder: str | None) -> None:
        self.holder = holder
        super().__init__(message)


class LockTimeout(StateError):
    """A resource lock was not obtained within its timeout."""


# -- the coordination service itself --------------------------------------------------------


class CoordinationUnavailable(EpochsError):
    """ZooKeeper cannot be reached or has lost quorum; the outcome is "nothing written"."""


class SessionLost(CoordinationUnavailable):
    """The ZooKeeper session expired while this handle held leadership or an attempt."""


class ContentionExhausted(EpochsError):
    """A compare-and-set kept losing to concurrent writers; retry later."""
