"""A started kazoo client seen through the eyes of the ledger: connection states and bounded calls.

Connection states are handled the way Curator handles them: while the session is SUSPENDED no write
is sent (it waits for the reconnect, up to a deadline); once the session is LOST, every handle that
was obtained under it (leadership, attempts) is abandoned and must be obtained again.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from airflow_epochs.coordination.errors import CoordinationUnavailable, SessionLost

T = TypeVar("T")

# Errors after which the same call may be repeated once the client has reconnected.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
    KazooTimeoutError,
)

# One of: ("create", path, data, sequence) ("set", path, data, version) ("delete", path, version)
# ("check", path, version)
Op = tuple[Any, ...]

_SESSIONS: weakref.WeakKeyDictionary[KazooClient, Session] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


class Session:
    """Connection-state tracking and time-bounded calls on one started :class:`KazooClient`.

    Use :meth:`of` so that every ledger, lease or lock on the same client shares one listener.

    :param client: a started kazoo client.
    :param op_timeout: seconds to wait for a reconnect, and for one call, before giving up.
    """

    def __init__(self, client: KazooClient, *, op_timeout: float = 15.0) -> None:
        self.client = client
        self.op_timeout = op_timeout
        self._connected = threading.Event()
        self._lost = 0
        self._lock = threading.Lock()
        # Counted, not guessed: what the coordination costs in ZooKeeper requests.
        self.stats = {"reads": 0, "transactions": 0, "writes": 0, "failed_transactions": 0}
        if client.state == KazooState.CONNECTED:
            self._connected.set()
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
            else:
                self._connected.clear()
                if state == KazooState.LOST:
                    self._lost += 1

    @property
    def lost_count(self) -> int:
        """How many times the session was LOST; a handle remembers it to detect a loss since."""
        with self._lock:
            return self._lost

    def ensure_not_lost_since(self, lost_count: int, what: str) -> None:
        if self.lost_count != lost_count:
            raise SessionLost(
                f"the ZooKeeper session was lost after {what} was obtained; {what} is abandoned "
                "and must be obtained again"
            )

    def wait_connected(self, deadline: float) -> None:
        """Block until the client is connected, or raise :class:`CoordinationUnavailable`."""
        if self.client.state == KazooState.CONNECTED:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._connected.wait(remaining):
            raise CoordinationUnavailable(
                f"ZooKeeper at {self.client.hosts} is not reachable or has no quorum "
                f"(state {self.client.state}); nothing was written"
            )

    def call(self, fn: Callable[[], T], *, what: str, timeout: float | None = None) -> T:
        """Run ``fn`` (which issues ZooKeeper requests) once connected; repeat it after transient
        errors until ``timeout`` (default :attr:`op_timeout`) has passed. ``fn`` must be safe to
        repeat: the ledger's operations re-read state and are idempotent.
        """
        budget = self.op_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        last: BaseException | None = None
        while True:
            try:
                self.wait_connected(deadline)
            except CoordinationUnavailable as exc:
                if last is not None:
                    raise CoordinationUnavailable(f"{what}: {exc} (last error: {last!r})") from last
                raise CoordinationUnavailable(f"{what}: {exc}") from None
            try:
                return fn()
            except ConnectionClosedError as exc:
                raise CoordinationUnavailable(f"{what}: the ZooKeeper client is closed") from exc
            except TRANSIENT_ERRORS as exc:
                last = exc
                if time.monotonic() >= deadline:
                    raise CoordinationUnavailable(
                        f"{what}: ZooKeeper did not answer within {budget:.0f} s ({exc!r}); "
                        "its outcome is unknown, and repeating the same call is safe"
                    ) from exc
                time.sleep(0.05)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    # -- bounded primitives (each one waits at most op_timeout for its answer) ---------------

    def get(self, path: str) -> tuple[bytes, Any] | None:
        """Data and stat of ``path``, or None if it does not exist."""
        self._count("reads")
        try:
            data, stat = self.client.get_async(path).get(timeout=self.op_timeout)
        except NoNodeError:
            return None
        return data, stat

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        """Pipelined reads: all requests are sent before the first answer is awaited."""
        self._count("reads", len(paths))
        pending = [self.client.get_async(p) for p in paths]
        out: list[tuple[bytes, Any] | None] = []
        for result in pending:
            try:
                data, stat = result.get(timeout=self.op_timeout)
            except NoNodeError:
                out.append(None)
            else:
                out.append((data, stat))
        return out

    def children(self, path: str) -> list[str] | None:
        self._count("reads")
        try:
            names: list[str] = self.client.get_children_async(path).get(timeout=self.op_timeout)
        except NoNodeError:
            return None
        return names

    def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Commit ``ops`` as one multi-op transaction; returns kazoo's per-op results."""
        tx = self.client.transaction()
        for op in ops:
            kind = op[0]
            if kind == "create":
                tx.create(op[1], op[2], sequence=op[3])
            elif kind == "set":
                tx.set_data(op[1], op[2], version=op[3])
            elif kind == "delete":
                tx.delete(op[1], version=op[2])
            elif kind == "check":
                tx.check(op[1], op[2])
            else:  # pragma: no cover - programming error
                raise ValueError(f"unknown transaction op {kind!r}")
        results: list[Any] = tx.commit_async().get(timeout=self.op_timeout)
        if failed(results) is None:
            self._count("transactions")
            self._count("writes", sum(1 for op in ops if op[0] != "check"))
        else:
            self._count("failed_transactions")
        return results


def failed(results: Sequence[Any]) -> BaseException | None:
    """The first real failure in a transaction's results (kazoo marks the others as rolled back)."""
    from kazoo.exceptions import RolledBackError, RuntimeInconsistency

    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return result
    for result in results:
        if isinstance(result, BaseException):
            return result
    return None
