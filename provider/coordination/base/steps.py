"""The steps of one ZooKeeper multi-op transaction, as small typed values.

A transaction is a list of steps; when it fails, :func:`first_failure` names the step that made it
fail, so a caller matches a failure by the step it built (``failure.step is fence``) or by its kind,
never by its position in the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import RolledBackError, RuntimeInconsistency

# A version of -1 means "any version" (for Check: "the node exists").
_ANY_VERSION = -1


@dataclass(frozen=True, eq=False)
class Create:
    """Create ``path`` holding ``data`` (a sequential node gets a counter appended to its name; an
    ephemeral one goes with the session that created it)."""

    path: str
    data: bytes = b""
    sequential: bool = False
    ephemeral: bool = False


@dataclass(frozen=True, eq=False)
class SetData:
    """Replace the data of ``path`` if its version is ``version`` (-1: any version)."""

    path: str
    data: bytes
    version: int = _ANY_VERSION


@dataclass(frozen=True, eq=False)
class Check:
    """Require ``path`` to be at ``version`` (-1: to exist) without changing it."""

    path: str
    version: int = _ANY_VERSION


@dataclass(frozen=True, eq=False)
class Delete:
    """Delete ``path`` if its version is ``version`` (-1: any version)."""

    path: str
    version: int = _ANY_VERSION


Step = Create | SetData | Check | Delete


@dataclass(frozen=True)
class Failure:
    """The step that made a transaction fail, and ZooKeeper's error for it."""

    step: Step
    error: BaseException


def first_failure(steps: Sequence[Step], results: Sequence[Any]) -> Failure | None:
    """The step whose error made a multi-op fail (kazoo marks the others as rolled back), or None."""
    for step, result in zip(steps, results, strict=True):
        if isinstance(result, BaseException) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return Failure(step, result)
    for step, result in zip(steps, results, strict=True):
        if isinstance(result, BaseException):
            return Failure(step, result)
    return None


def writes(steps: Sequence[Step]) -> int:
    """How many of ``steps`` change a node (checks change nothing)."""
    return sum(1 for step in steps if not isinstance(step, Check))
