"""Exceptions raised by the coordination core, in one taxonomy of four kinds.

========================  ============================================  =================================
kind                      classes                                       what a caller does
========================  ============================================  =================================
bad input                 :class:`InvalidInput` and its subclasses      fix the call; nothing was written
definite refusal          :class:`StateError` and its subclasses        nothing was written; do not retry
                          (:class:`SessionLost` included)               the same call blindly
retryable                 :class:`RetryableError`:                      nothing was written; the same call
                          :class:`CoordinationUnavailable`,             may be repeated (with backoff)
                          :class:`ContentionExhausted`
outcome unknown           :class:`OutcomeUnknown`                       a write was sent and its answer
                          (:class:`CallUnfinished`: part of the call    lost (or part of it committed and the
                          committed, the message says what)             rest did not finish); repeat with the
                                                                        same ``request_id`` to learn or
                                                                        finish it
========================  ============================================  =================================

"Nothing was written" is said (in this table and in messages) only of the caller's own request, and
only when the library checked it: every refusal first looks the call's request id up (when it may be
on record: a supplied id, a lost answer, or a write of this call that committed), and a request it
finds committed is answered with its result, flagged with
:class:`~airflow_epochs.coordination.wire.records.Overtaken` if it was superseded, aborted, rolled back
or sealed since. A refusal about a compacted epoch says that its request's outcome is no longer on
record. The full outcome table per call is in the docs (reference/outcomes).

:class:`CorruptPayload` (a znode that does not fit the schema) is none of these: it needs a human.
Every class says which kind it is through :attr:`EpochsError.kind` and :attr:`EpochsError.retryable`,
so an operator can decide on a retry without a list of classes. Every message names the offending value.
"""

from __future__ import annotations

from typing import ClassVar


class EpochsError(Exception):
    """Base class of every error raised by :mod:`airflow_epochs.coordination`."""

    #: ``bad_input``, ``refused``, ``retryable``, ``outcome_unknown`` or ``corrupt``
    kind: ClassVar[str] = "refused"
    #: whether repeating the same call later may succeed (with the same request id, for outcome unknown)
    retryable: ClassVar[bool] = False


# -- bad input: raised before anything is written ---------------------------------------------


class InvalidInput(EpochsError, ValueError):
    """An argument is malformed; nothing was written."""

    kind = "bad_input"


class InvalidName(InvalidInput):
    """A name that would become a znode path segment is not acceptable."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.name_kind = kind  # what the name is for; ``kind`` is the error's place in the taxonomy
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

    kind = "corrupt"


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
    """The epoch is sealed; it can change only through a recorded rollback.

    When the close of one attempt finds the epoch sealed by another (a deployment that took the epoch
    over), ``sealed_by_attempt``, ``sealed_by_owner`` and ``generation`` name that seal, from the same
    read of the epoch record the refusal was decided on (None when not known: compacted)."""

    def __init__(self, message: str, *, sealed_by_attempt: int | None = None, sealed_by_owner: str | None = None,
                 generation: int | None = None) -> None:
        self.sealed_by_attempt = sealed_by_attempt
        self.sealed_by_owner = sealed_by_owner
        self.generation = generation
        super().__init__(message)


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


class SnapshotHistoryUnavailable(StateError):
    """A question about the snapshots sealed before an epoch reaches into compacted epochs that no
    longer say: compacted without an archive, or further back than a read walks. The message names the
    pipeline, the partition, the epoch asked about and where the readable history ends; nothing is
    answered rather than a false "no snapshot"."""

    def __init__(self, message: str, *, partition: str, before_epoch: int, history_ends: int) -> None:
        self.partition = partition
        self.before_epoch = before_epoch
        #: the newest epoch at or below which the history was not read (compacted, or past the walk)
        self.history_ends = history_ends
        super().__init__(message)


class PartitionAlreadySealed(StateError):
    """The partition is sealed by another attempt or with another manifest."""


class TooManyAttempts(StateError):
    """The epoch has had as many attempts as one epoch may (docs: Bounded answers)."""


class TooManyRequests(StateError):
    """The pipeline remembers as many pipeline-level request ids as it may (docs: Bounded answers)."""


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


class AccessDenied(StateError):
    """ZooKeeper refused the request for lack of credentials or ACL rights; nothing was written."""


class SessionLost(StateError):
    """The ZooKeeper session under which this handle (an attempt, the leadership) was obtained in this
    process has expired; the handle is abandoned and must be obtained again. Nothing was written."""


# -- the coordination service itself --------------------------------------------------------


class RetryableError(EpochsError):
    """Nothing was written and the same call may succeed later: repeat it, with backoff."""

    kind = "retryable"
    retryable = True


class CoordinationUnavailable(RetryableError):
    """ZooKeeper cannot be reached or has lost quorum, and no write of this call was sent."""


class ContentionExhausted(RetryableError):
    """A compare-and-set kept losing to concurrent writers; nothing was written; retry later."""


class LockTimeout(RetryableError):
    """A resource lock was not obtained within its timeout; nothing was written."""


class OutcomeUnknown(EpochsError):
    """A write was sent, its answer was lost, and ZooKeeper could not be asked in time whether it
    committed. Repeat the same call with ``request_id=exc.request_id``: the repeat finds the first
    one if it committed (and returns its result) or applies it now, never twice.

    :param request_id: the id the lost request was written with.
    """

    kind = "outcome_unknown"
    retryable = True

    def __init__(self, message: str, *, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(message)


class CallUnfinished(OutcomeUnknown):
    """Part of the call committed (the message says what) and the rest could not be done before the
    deadline. Repeat the same call with ``request_id=exc.request_id``: the repeat finds what committed
    (never applies it twice) and finishes the rest."""
