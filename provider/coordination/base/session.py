"""A started kazoo client seen through the eyes of the ledger: connection states, one deadline per
call, lost answers, and the translation of every kazoo exception at this module's boundary.

Connection states are handled the way Curator handles them: while the connection is SUSPENDED no
request is sent (the call waits for the reconnect, within its deadline); once a session is LOST, the
handles obtained under it in this process (attempts, leadership) are abandoned.

A call (:meth:`Session.call`) gets ONE deadline for everything it does: reads, writes, reconnects
and the retries in between. When the answer to a write is lost (the connection drops after the
request left), the call does not guess: before doing anything else it asks ZooKeeper (after a
``sync``) whether its request committed, through the caller's ``find``. Only when that cannot be
learned before the deadline does it raise :class:`OutcomeUnknown`, carrying the request id; a later
call with the same id finds or finishes the first one.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from airflow_epochs.coordination.base.errors import (
    AccessDenied,
    CallUnfinished,
    ContentionExhausted,
    CoordinationUnavailable,
    EpochsError,
    InvalidInput,
    OutcomeUnknown,
    SessionLost,
    StateError,
)
from airflow_epochs.coordination.base.steps import Check, Create, Delete, Failure, SetData, Step, first_failure, writes

T = TypeVar("T")

# Errors after which the same call may go on once the client has reconnected.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
    KazooTimeoutError,
)

DEFAULT_OP_TIMEOUT = 15.0
# Compare-and-set rounds lost to other writers before a call gives up (ContentionExhausted).
MAX_CONFLICTS = 200

_REQUEST_ID = re.compile(r"[A-Za-z0-9_.=:@+\-]{1,128}")

_SESSIONS: weakref.WeakKeyDictionary[KazooClient, Session] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


class Conflict(Exception):
    """A version check or a create-only write lost to another writer: read again and decide again.

    Raised by a call's body; :meth:`Session.call` runs the body again (never a refusal: nothing of
    this attempt was written, since a failed multi-op writes nothing).
    """


def new_request_id() -> str:
    """A fresh request id (the id a write carries so that its outcome can be found after a lost answer)."""
    return uuid.uuid4().hex


def validate_request_id(request_id: object) -> str:
    """Return ``request_id`` if it can be stored as a znode name, else raise :class:`InvalidInput`."""
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id) or request_id in (".", ".."):
        raise InvalidInput(
            f"request_id must be 1-128 characters of A-Z a-z 0-9 _ . = : @ + -, not {request_id!r}"
        )
    return request_id


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
                tx.create(step.path, step.data, sequence=step.sequential)
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


class Session:
    """Connection-state tracking and deadline-bounded calls on one started :class:`KazooClient`.

    Use :meth:`of` so that every ledger, lease or lock on the same client shares one listener.

    :param client: a started kazoo client.
    :param op_timeout: default deadline of one call, in seconds (reconnects and retries included).
    """

    def __init__(self, client: KazooClient, *, op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        self.client = client
        self.op_timeout = op_timeout
        self._connected = threading.Event()
        self._lock = threading.Lock()
        self._session_id: int | None = None
        self._lost_sessions: set[int] = set()
        # Counted, not guessed: what the coordination costs in ZooKeeper requests.
        self.stats = {"reads": 0, "transactions": 0, "writes": 0, "failed_transactions": 0}
        # Immutable documents (configuration versions) read once per client, keyed by path and czxid.
        self.cache: dict[str, Any] = {}
        if client.state == KazooState.CONNECTED:
            self._connected.set()
            self._session_id = _session_id(client)
        client.add_listener(self._on_state)

    @classmethod
    def of(cls, client: KazooClient) -> Session:
        """Return the shared :class:`Session` of ``client``, creating it on first use."""
        with _SESSIONS_LOCK:
            session = _SESSIONS.get(client)
            if session is None:
                session = cls(client)
                _SESSIONS[client] = session
            return session

    # kazoo calls listeners from its connection thread: record, never block here.
    def _on_state(self, state: str) -> None:
        with self._lock:
            if state == KazooState.CONNECTED:
                self._connected.set()
                self._session_id = _session_id(self.client)
            else:
                self._connected.clear()
                if state == KazooState.LOST:
                    if self._session_id is not None:
                        self._lost_sessions.add(self._session_id)
                    self._session_id = None

    @property
    def session_id(self) -> int | None:
        """The current ZooKeeper session id, or None while not connected."""
        with self._lock:
            return self._session_id if self._session_id is not None else _session_id(self.client)

    def ensure_session_alive(self, session_id: int | None, what: str) -> None:
        """Refuse a handle obtained under a session of this client that has since expired.

        A handle from another process (another session) is not refused here: fencing tokens in
        ZooKeeper decide whether it is still current.
        """
        if session_id is None:
            return
        with self._lock:
            lost = session_id in self._lost_sessions
        if lost:
            raise SessionLost(
                f"the ZooKeeper session under which {what} was obtained has expired; {what} is abandoned "
                "and must be obtained again; nothing was written"
            )

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def wait_connected(self, deadline: float) -> bool:
        """Block until the client is connected; False if the deadline passes first."""
        if self.client.state == KazooState.CONNECTED:
            return True
        remaining = deadline - time.monotonic()
        return remaining > 0 and self._connected.wait(remaining)

    def call(self, body: Callable[[Call], T], *, what: str, timeout: float | None = None,
             request_id: str | None = None, find: Callable[[Call], T | None] | None = None,
             started: Call | None = None) -> T:
        """Run ``body`` (which reads, decides and writes through its :class:`Call`) until it returns or
        raises a definite answer, within ONE deadline (``timeout``, default :attr:`op_timeout`).

        ``find`` looks for the committed effect of this call's request id (None if not there) and
        answers with it; it is the one place where a call resolves its own request id:

        - with a caller-supplied ``request_id`` it runs first: an earlier call with that id may have
          committed, and its result (flagged if overtaken since) is returned instead of applying it again;
        - after a lost answer (a write was sent) it runs before anything else, after a ``sync``;
        - before a refusal (:class:`StateError` from ``body``) leaves this call, whenever this
          request may be on record (a supplied id, a lost answer, a committed write of this call):
          a refusal is raised only when ``find`` found nothing, so "nothing was written" is checked.

        ``started`` (from :meth:`begin`) continues a call whose create-only transaction was sent
        ahead (pipelined): ``find`` does not run first, the body reads that transaction's answer.

        :class:`Conflict` from ``body`` runs it again (jittered; bounded); a lost connection waits for
        the reconnect. Past the deadline: :class:`OutcomeUnknown` (or :class:`CallUnfinished`) with the
        request id if a write of this call was sent or committed, else :class:`CoordinationUnavailable`.
        """
        budget = self.op_timeout if timeout is None else timeout
        call = started or self.begin(request_id, budget)
        deadline = call.deadline
        last: BaseException | None = None
        conflicts = 0
        pause = 0.02
        look_first = request_id is not None and started is None  # a refusal still looks it up
        refusal: StateError | None = None  # decided, waiting for the request id to be looked up
        while True:
            if not self.wait_connected(deadline):
                raise self._gave_up(call, what, budget, last)
            try:
                if (call.sent or look_first or refusal is not None) and find is not None:
                    if call.sent or refusal is not None:
                        call.sync("/")
                    found = find(call)
                    if found is not None:
                        return found
                    look_first = False
                if refusal is not None:
                    raise refusal
                return body(call)
            except StateError as exc:
                if exc is refusal or find is None or not (call.sent or call.wrote or request_id is not None):
                    raise
                refusal = exc  # look the request id up first (next round), then refuse
            except Conflict:
                conflicts += 1
                if conflicts >= MAX_CONFLICTS:
                    if call.sent or call.wrote:
                        raise self._gave_up(call, what, budget, last) from None
                    raise ContentionExhausted(
                        f"{what}: lost {conflicts} compare-and-set rounds to other writers; nothing was written"
                    ) from None
                time.sleep(random.uniform(0, min(0.002 * conflicts, 0.05)))  # noqa: S311 - jitter
            except TRANSIENT_ERRORS as exc:
                last = exc
                if time.monotonic() >= deadline:
                    raise self._gave_up(call, what, budget, last) from exc
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 0.5)
            except (NoAuthError, AuthFailedError) as exc:
                raise AccessDenied(
                    f"{what}: ZooKeeper refused access ({type(exc).__name__}); check the connection's "
                    "credentials and the znodes' ACLs"
                ) from exc
            except EpochsError:
                raise
            except (ConnectionClosedError, KazooException) as exc:  # nothing from kazoo leaves this module raw
                if call.sent or call.awaiting or call.wrote:
                    raise self._gave_up(call, what, budget, exc) from exc
                cause = "the ZooKeeper client is closed" if isinstance(exc, ConnectionClosedError) \
                    else f"ZooKeeper answered {exc!r}"
                raise CoordinationUnavailable(f"{what}: {cause}; nothing was written") from exc

    def begin(self, request_id: str | None = None, timeout: float | None = None) -> Call:
        """A call's view before its body runs: pipelined work (a transaction sent ahead with
        :meth:`Call.send`) happens under it, then :meth:`call` with ``started`` runs the body under the
        same request id and deadline."""
        budget = self.op_timeout if timeout is None else timeout
        return Call(self, time.monotonic() + budget, request_id or new_request_id())

    def _gave_up(self, call: Call, what: str, budget: float, last: BaseException | None) -> EpochsError:
        detail = f" (last error: {last!r})" if last is not None else ""
        if call.sent or call.awaiting:
            return OutcomeUnknown(
                f"{what}: a write was sent but ZooKeeper at {self.client.hosts} could not be asked within "
                f"{budget:g} s whether it committed{detail}; repeat the call with request_id="
                f"{call.request_id!r} to find out or finish it",
                request_id=call.request_id,
            )
        if call.wrote:
            return CallUnfinished(
                f"{what}: a write of this call committed, and the rest of the call could not finish within "
                f"{budget:g} s (ZooKeeper at {self.client.hosts}){detail}; repeat the call with request_id="
                f"{call.request_id!r} to finish it (what committed is found, not applied again)",
                request_id=call.request_id,
            )
        return CoordinationUnavailable(
            f"{what}: ZooKeeper at {self.client.hosts} is not reachable or has no quorum "
            f"(state {self.client.state}, waited {budget:g} s){detail}; no write of this call was sent, so "
            "nothing was written"
        )


def _session_id(client: KazooClient) -> int | None:
    ident = client.client_id
    return int(ident[0]) if ident else None
