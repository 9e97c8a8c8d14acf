"""Refusals of re-seals and of votes under a version (see :mod:`..protocol.reseal`).

Each is a definite refusal (:class:`~.errors.StateError`): nothing was written. Where an existing
refusal means the same (a partition not sealed, an unknown partition), the class is also that one, so
a caller that already catches it keeps working.
"""

from __future__ import annotations

from airflow_epochs.coordination.base.errors import PartitionNotSealed, StateError, UnknownPartition


class ResealRefused(StateError):
    """A re-seal (or a vote under a version) was refused; nothing was written."""


class ResealNotSealed(ResealRefused, PartitionNotSealed):
    """The (epoch, partition) to re-seal is not sealed yet: finish or roll back the epoch instead."""


class ResealUnknownPartition(ResealRefused, UnknownPartition):
    """The partition is not part of the configuration in force at that epoch."""


class ResealCompacted(ResealRefused):
    """The epoch is compacted: its inputs and votes are archived and cannot be re-produced."""


class ResealInFlight(ResealRefused):
    """Another re-seal of the same (epoch, partition) is open (one in flight at a time)."""

    def __init__(self, message: str, *, version: int, request: str) -> None:
        self.version = version
        self.request = request
        super().__init__(message)


class VersionNotOpen(ResealRefused):
    """A vote under a version that is not the open one (sealed already, or never opened)."""


class InputsNotResealed(ResealRefused):
    """A vote under a correction's version before the stale seals it comes after are re-sealed."""
