"""One call's view of a session: every request waits at most until the call's deadline, a write whose
answer is lost marks the call as sent (its outcome must be found, not assumed), and a lost race on a
version raises :class:`Conflict` (decide again). Transactions may be sent ahead and shared between
calls (:func:`send_shared`); :class:`~.session.Session` runs a call's body."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from airflow_epochs.coordination.base.steps import Check, Create, Delete, Failure, SetData, Step, first_failure, writes

if TYPE_CHECKING:  # a call belongs to a session, which starts it: a type-only import, no circle
    from airflow_epochs.coordination.base.session import Session


# Errors after which the same call may go on once the client has reconnected.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
    KazooTimeoutError,
)


class Conflict(Exception):
    """A version check or a create-only write lost to another writer: read again and decide again.

    Raised by a call's body; :meth:`Session.call` runs the body again (never a refusal: nothing of
    this attempt was written, since a failed multi-op writes nothing).
    """


def commit_or_conflict(call: Call, steps: Sequence[Step]) -> list[Any]:
    """Commit ``steps``; a lost race on a version or a create-only node raises :class:`Conflict` (decide
    again on fresh state), any other failure is raised as kazoo reported it."""
    results = call.commit(steps)
    failure = first_failure(steps, results)
    if failure is None:
        return results
    if isinstance(failure.error, (BadVersionError, NodeExistsError, NoNodeError)):
        raise Conflict()
    raise failure.error


class Call:
    """One call's view of the session: every request waits at most until the call's deadline, and a
    write whose answer is lost marks the call as ``sent`` (its outcome must be found, not assumed)."""

    def __init__(self, session: Session, deadline: float, request_id: str) -> None:
        self.session = session
        self.client = session.client
        self.deadline = deadline
        self.request_id = request_id
        self.sent = False  # a write left and its answer was lost: it may have committed
        self.awaiting = 0  # transactions sent ahead (:meth:`send`) whose answer was not read yet
        self.wrote = False  # a write of this call committed (its answer arrived)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise KazooTimeoutError("the call's deadline passed")
        return left

    def get(self, path: str, watch: Callable[[Any], Any] | None = None) -> tuple[bytes, Any] | None:
        """Data and stat of ``path``, or None if it does not exist (a watch is left either way)."""
        self.session.count("reads")
        try:
            data, stat = self.client.get_async(path, watch=watch).get(timeout=self.remaining())
        except NoNodeError:
            if watch is not None:  # a failed read leaves no watch; exists() does
                stat = self.exists(path, watch=watch)
                if stat is not None:
                    return self.get(path, watch=watch)
            return None
        return data, stat

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        """Pipelined reads: all requests are sent before the first answer is awaited."""
        self.session.count("reads", len(paths))
        pending = [self.client.get_async(p) for p in paths]
        out: list[tuple[bytes, Any] | None] = []
        for result in pending:
            try:
                data, stat = result.get(timeout=self.remaining())
            except NoNodeError:
                out.append(None)
            else:
                out.append((data, stat))
        return out

    def read_ahead(self, path: str) -> Any:
        """Send a read of ``path`` without waiting (pipelined work reads before it sends): kazoo's async
        result, to pass to :meth:`read_answer`."""
        self.session.count("reads")
        return self.client.get_async(path)

    def read_answer(self, pending: Any) -> tuple[bytes, Any] | None:
        """The answer of a read sent by :meth:`read_ahead`: data and stat, or None if the node does not
        exist (kazoo's errors are raised as they came)."""
        try:
            data, stat = pending.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except NoNodeError:
            return None
        return data, stat

    def exists_many(self, paths: Sequence[str]) -> list[Any]:
        """Pipelined stats (None for a missing node)."""
        self.session.count("reads", len(paths))
        pending = [self.client.exists_async(p) for p in paths]
        return [result.get(timeout=self.remaining()) for result in pending]

    def exists(self, path: str, watch: Callable[[Any], Any] | None = None) -> Any:
        self.session.count("reads")
        return self.client.exists_async(path, watch=watch).get(timeout=self.remaining())

    def children(self, path: str, watch: Callable[[Any], Any] | None = None) -> list[str] | None:
        self.session.count("reads")
        try:
            names: list[str] = self.client.get_children_async(path, watch=watch).get(timeout=self.remaining())
        except NoNodeError:
            return None
        return names

    def sync(self, path: str) -> None:
        """Make the server this client talks to catch up with the leader (before reading an outcome)."""
        self.client.sync_async(path).get(timeout=self.remaining())

    def commit(self, steps: Sequence[Step]) -> list[Any]:
        """Commit ``steps`` as one multi-op transaction; returns kazoo's per-step results (errors included).

        If the answer is lost, the call is marked ``sent``: from then on it must find out what happened.
        """
        return self.settle(steps, self.send(steps))

    def send(self, steps: Sequence[Step]) -> Any:
        """Send ``steps`` as one multi-op transaction without waiting: returns kazoo's async result, to
        pass to :meth:`settle` (several calls' transactions can be in flight on one connection)."""
        tx = self.client.transaction()
        for step in steps:
            if isinstance(step, Create):
                tx.create(step.path, step.data, sequence=step.sequential, ephemeral=step.ephemeral)
            elif isinstance(step, SetData):
                tx.set_data(step.path, step.data, version=step.version)
            elif isinstance(step, Delete):
                tx.delete(step.path, version=step.version)
            elif isinstance(step, Check):
                tx.check(step.path, step.version)
            else:  # pragma: no cover - programming error
                raise TypeError(f"not a transaction step: {step!r}")
        pending = tx.commit_async()
        self.awaiting += 1  # in flight: until its answer is read, it may have committed
        return pending

    def await_answer(self, pending: Any) -> None:
        """Wait (within the call's deadline) until the answer of ``pending`` is here, without reading it.
        Answers come in the order the requests were sent, so once the last one of a pipelined batch is
        here every earlier one is too: the batch is then read without waiting once per answer."""
        pending.wait(max(0.0, self.deadline - time.monotonic()))

    def settle(self, steps: Sequence[Step], pending: Any) -> list[Any]:
        """Wait for the answer of ``steps`` sent by :meth:`send`; as :meth:`commit` does."""
        try:
            # An answer already here is read even past the deadline: it says what happened.
            results: list[Any] = pending.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except TRANSIENT_ERRORS:
            self.sent = True
            raise
        finally:
            self.awaiting -= 1
        whole = pending.whole() if isinstance(pending, SharedAnswer) else (steps, results)
        if whole is not None:  # a shared transaction is counted once, by its first sharer
            if first_failure(*whole) is None:
                self.session.count("transactions")
                self.session.count("writes", writes(whole[0]))
            else:
                self.session.count("failed_transactions")
        if first_failure(steps, results) is None:
            self.wrote = True
        return results

    def try_commit(self, steps: Sequence[Step]) -> Failure | None:
        """Commit ``steps``; None if they committed, else the step that made them fail and its error."""
        return first_failure(steps, self.commit(steps))


class SharedAnswer:
    """One call's share of a transaction sent for several calls (:func:`send_shared`): its answer is
    the results of this call's steps (``indices`` into the transaction). The transaction commits whole
    or not at all, so a share is read like a transaction of its own, except that it may have been
    rolled back by another call's step (:meth:`rolled_back`)."""

    def __init__(self, pending: Any, steps: Sequence[Step], indices: Sequence[int], *, first: bool) -> None:
        self.pending = pending
        self.steps = steps  # the whole transaction
        self.indices = tuple(indices)
        self.first = first  # the share that counts the transaction in the session's stats

    def get(self, timeout: float | None = None) -> list[Any]:
        results = self.pending.get(timeout=timeout)
        return [results[i] for i in self.indices]

    def wait(self, timeout: float | None = None) -> Any:
        return self.pending.wait(timeout)

    def whole(self) -> tuple[Sequence[Step], list[Any]] | None:
        """The whole transaction and its results, for the first share only (None for the others)."""
        return (self.steps, self.pending.get(timeout=0)) if self.first else None

    def rolled_back(self) -> bool:
        """The answer is here, the transaction failed, and none of this share's steps made it fail: this
        call wrote nothing and was refused nothing (send its steps again, on their own)."""
        if not self.pending.ready() or not self.pending.successful():
            return False
        results = self.pending.get(timeout=0)
        if first_failure(self.steps, results) is None:
            return False
        return not any(isinstance(results[i], BaseException)
                       and not isinstance(results[i], (RolledBackError, RuntimeInconsistency)) for i in self.indices)


def send_shared(calls: Sequence[Call], steps: Sequence[Step], shares: Sequence[Sequence[int]]) -> list[SharedAnswer]:
    """Send ``steps`` as ONE transaction on behalf of ``calls``, ``shares[i]`` being the positions of the
    steps of ``calls[i]`` (steps may be shared, such as a common fence). Each call reads its share with
    :meth:`Call.settle` and, like a call that sent its own transaction, is marked ``sent`` if the answer
    is lost (then it committed for every call or for none)."""
    pending = calls[0].send(steps)
    for call in calls[1:]:
        call.awaiting += 1
    return [SharedAnswer(pending, steps, share, first=i == 0) for i, share in enumerate(shares)]
