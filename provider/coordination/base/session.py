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
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    KazooException,
    NoAuthError,
)

from airflow_epochs.coordination.base.call import TRANSIENT_ERRORS, Call, Conflict
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

T = TypeVar("T")


DEFAULT_OP_TIMEOUT = 15.0
# Compare-and-set rounds lost to other writers before a call gives up (ContentionExhausted).
_MAX_CONFLICTS = 200

_REQUEST_ID = re.compile(r"[A-Za-z0-9_.=:@+\-]{1,128}")

_SESSIONS: weakref.WeakKeyDictionary[KazooClient, Session] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


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
                if conflicts >= _MAX_CONFLICTS:
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
