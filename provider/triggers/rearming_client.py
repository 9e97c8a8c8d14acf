"""A kazoo client whose one-shot watches survive a lost connection, re-armed in a few requests.

kazoo 2.11, on a lost connection (``SUSPENDED``), fires every watcher with a ``NONE`` event and
forgets them all. A triggerer holding a thousand waits then re-reads a thousand nodes the moment the
connection is back (one request each, all at once, against the server's ``globalOutstandingLimit``),
and a change made while it was away is found only because every wait reads again.

ZooKeeper's own answer is the ``SetWatches`` request (opcode 101) that its Java client sends after
every reconnect: the paths of the watches the client holds, split by kind (data, exists, children),
and the last zxid the client saw. The server re-arms them on the new connection and, in the same
step, fires the watches whose node changed after that zxid (a data watch whose node changed or went
away, an exists watch whose node now exists, a child watch whose children changed). So no change
made during the outage is missed, a wait whose node did not change is not woken at all, and one
request re-arms a few thousand watches.

:class:`RearmingKazooClient` extends kazoo (a subclass, not a fork) with that request:

* on a lost connection it keeps its watchers (no ``NONE`` events) and remembers the last zxid seen;
* once connected again it sends ``SetWatches`` in batches of at most :data:`SET_WATCHES_MAX_BYTES`,
  at most ``rearm_inflight`` of them outstanding at a time; the events the server fires reach the
  kept watchers through kazoo's normal routing by path (they never left kazoo's tables);
* when the session itself is lost (expired or closed) the watches are gone on the server, and it
  behaves as kazoo does: every watcher hears ``NONE`` and must read again.

It also counts the requests it sends and the most it ever had in flight (:meth:`stats`), and hands
out a per-event-loop semaphore (:meth:`gate`) that bounds the reads of the triggers sharing it.

Why not ``addWatch`` (opcode 106, persistent recursive watches, ZooKeeper 3.6+)? A persistent watch
is also tied to the connection: after a reconnect it has to be sent again (``SetWatches2``), and the
server fires nothing for the changes made in between, so every wait would still read once after each
failover. ``SetWatches`` with the last zxid is the request that answers "what changed while I was
away" in one round trip.

The seams used are kazoo's own: ``_session_callback`` resets watchers through ``_reset_watchers``
(overridden here), requests go through ``_call`` (the client's request queue, as kazoo's ``*_async``
methods do), and ``_data_watchers`` / ``_child_watchers`` are the tables kazoo routes watch events
through. They are checked against the kazoo version this was written for at import.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import namedtuple
from collections.abc import Iterator
from typing import Any

import kazoo
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.protocol.serialization import Exists, GetData, int_struct, long_struct, write_string
from kazoo.protocol.states import KazooState, KeeperState

log = logging.getLogger(__name__)

# What a failed SetWatches may meet when the connection (not the server) failed: the next reconnect redoes it.
_CONNECTION_GONE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)

SET_WATCHES_MAX_BYTES = 128 * 1024
"""The largest SetWatches request sent (the Java client's own batch size); far below jute.maxbuffer."""

DEFAULT_MAX_INFLIGHT = 32
"""Reads the triggers of one event loop may have outstanding on one client at a time."""

DEFAULT_REARM_INFLIGHT = 2
"""SetWatches batches outstanding at a time while re-arming."""

_KNOWN_KAZOO = ("2.10", "2.11")  # what scripts/kazoo_matrix.sh passes with, as pyproject.toml pins
if not kazoo.version.__version__.startswith(_KNOWN_KAZOO):  # pragma: no cover - guards an upgrade
    raise ImportError(f"RearmingKazooClient was written against kazoo {', '.join(_KNOWN_KAZOO)}; "
                      f"kazoo {kazoo.version.__version__} is installed: check its watcher seams first")


class SetWatches(namedtuple("SetWatches", "relative_zxid data_watches exist_watches child_watches")):
    """ZooKeeper's SetWatches request (opcode 101), serialised as kazoo serialises its requests.

    jute: ``long relativeZxid; vector<ustring> dataWatches; vector<ustring> existWatches;
    vector<ustring> childWatches``. The reply is a bare header.
    """

    type = 101

    def serialize(self) -> bytearray:
        body = bytearray(long_struct.pack(self.relative_zxid))
        for paths in (self.data_watches, self.exist_watches, self.child_watches):
            body.extend(int_struct.pack(len(paths)))
            for path in paths:
                body.extend(write_string(path))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> None:
        return None


def _entry_size(path: str) -> int:
    return int(int_struct.size) + len(path.encode("utf-8"))


def set_watches_batches(relative_zxid: int, data: list[str], exist: list[str], child: list[str],
                        max_bytes: int = SET_WATCHES_MAX_BYTES) -> Iterator[SetWatches]:
    """The SetWatches requests that re-arm these watches, each serialised in at most ``max_bytes``."""
    batch: dict[str, list[str]] = {"data": [], "exist": [], "child": []}
    size = long_struct.size + 3 * int_struct.size
    for kind, paths in (("data", data), ("exist", exist), ("child", child)):
        for path in paths:
            grow = _entry_size(path)
            if size + grow > max_bytes and any(batch.values()):
                yield SetWatches(relative_zxid, batch["data"], batch["exist"], batch["child"])
                batch = {"data": [], "exist": [], "child": []}
                size = long_struct.size + 3 * int_struct.size
            batch[kind].append(path)
            size += grow
    if any(batch.values()):
        yield SetWatches(relative_zxid, batch["data"], batch["exist"], batch["child"])


class RearmingKazooClient(KazooClient):  # type: ignore[misc]  # kazoo ships no type hints
    """A :class:`~kazoo.client.KazooClient` that re-arms its watches after a lost connection.

    :param max_inflight: reads each event loop's :meth:`gate` lets through at once.
    :param rearm_inflight: SetWatches batches outstanding at once while re-arming.
    :param kwargs: passed to :class:`~kazoo.client.KazooClient`.
    """

    def __init__(self, *, max_inflight: int = DEFAULT_MAX_INFLIGHT,
                 rearm_inflight: int = DEFAULT_REARM_INFLIGHT, **kwargs: Any) -> None:
        if max_inflight < 1 or rearm_inflight < 1:
            raise ValueError(f"max_inflight ({max_inflight}) and rearm_inflight ({rearm_inflight}) "
                             "must be at least 1")
        self.max_inflight = max_inflight
        self.rearm_inflight = rearm_inflight
        self._stats_lock = threading.Lock()
        self._inflight = 0
        self._inflight_max = 0
        self._requests = 0
        self._rearm_requests = 0
        self._rearms = 0
        self._rearms_done = 0
        self._absent: set[str] = set()  # watched paths whose node did not exist when last read
        self._rearm_zxid: int | None = None  # set while kept watches wait to be re-armed
        self._unconfirmed_zxid: int | None = None  # the zxid of a re-arm not yet answered in full
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        super().__init__(**kwargs)
        self.add_listener(self._on_state)

    # -- requests --------------------------------------------------------------------------------

    def _call(self, request: Any, async_object: Any) -> Any:
        with self._stats_lock:
            self._requests += 1
            self._inflight += 1
            self._inflight_max = max(self._inflight_max, self._inflight)
        watched_exists = isinstance(request, Exists) and request.watcher is not None
        path = getattr(request, "path", None)

        def done(result: Any) -> None:
            with self._stats_lock:
                self._inflight -= 1
            if watched_exists and path is not None and result.successful():
                # an exists watch on an absent node is re-armed as an exists watch, else as a data watch
                if result.value is None:
                    self._absent.add(path)
                else:
                    self._absent.discard(path)
            elif isinstance(request, GetData) and request.watcher is not None and result.successful():
                self._absent.discard(path)

        async_object.rawlink(done)
        return super()._call(request, async_object)

    def stats(self) -> dict[str, int]:
        """Requests sent, the most ever in flight, SetWatches requests sent, re-arms begun and re-arms
        answered in full."""
        with self._stats_lock:
            return {"requests": self._requests, "inflight_max": self._inflight_max,
                    "inflight": self._inflight, "rearm_requests": self._rearm_requests, "rearms": self._rearms,
                    "rearms_done": self._rearms_done}

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._requests = 0
            self._rearm_requests = 0
            self._rearms = 0
            self._rearms_done = 0
            self._inflight_max = self._inflight

    def gate(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        """The semaphore bounding reads issued from ``loop`` on this client (made on first use)."""
        with self._stats_lock:
            gate = self._gates.get(loop)
            if gate is None:
                gate = asyncio.Semaphore(self.max_inflight)
                self._gates[loop] = gate
                for known in [known for known in self._gates if known.is_closed()]:
                    del self._gates[known]
            return gate

    # -- watches across a lost connection --------------------------------------------------------

    def _reset_watchers(self) -> None:
        if self.client_state in (KeeperState.CONNECTING,):
            # The connection is lost, the session may not be: keep the watchers for SetWatches.
            # A re-arm cut short by this loss must be redone from its own zxid: the reads answered
            # since then moved last_zxid past changes its unsent batches would have reported.
            if self._rearm_zxid is None:
                self._rearm_zxid = self.last_zxid if self._unconfirmed_zxid is None else self._unconfirmed_zxid
            return
        self._rearm_zxid = None
        self._unconfirmed_zxid = None
        super()._reset_watchers()  # the session is gone: so are its watches on the server

    def watched_paths(self) -> tuple[list[str], list[str], list[str]]:
        """(data, exists, child) watch paths this client holds, as the server knows them (chroot included)."""
        data_paths = [path for path, watchers in list(self._data_watchers.items()) if watchers]
        child = [path for path, watchers in list(self._child_watchers.items()) if watchers]
        exist = [path for path in data_paths if path in self._absent]
        data = [path for path in data_paths if path not in self._absent]
        return data, exist, child

    def _on_state(self, state: str) -> bool:
        if state == KazooState.CONNECTED and self._rearm_zxid is not None:
            zxid, self._rearm_zxid = self._rearm_zxid, None
            self._rearm(zxid)
        return False

    def _rearm(self, zxid: int) -> None:
        """Send the SetWatches batches, at most :attr:`rearm_inflight` outstanding (runs on kazoo's thread)."""
        data, exist, child = self.watched_paths()
        self._absent.intersection_update(exist)  # forget paths nobody watches any more
        pending = list(set_watches_batches(zxid, data, exist, child))
        with self._stats_lock:
            self._rearms += 1
            if not pending:
                self._rearms_done += 1
                return
        self._unconfirmed_zxid = zxid
        lock = threading.Lock()
        answered = [0]
        total = len(pending)
        refused: list[BaseException] = []

        def send_next(result: Any = None) -> None:
            with lock:
                if result is not None and result.successful():
                    answered[0] += 1
                    if answered[0] == total:
                        if self._unconfirmed_zxid == zxid:
                            self._unconfirmed_zxid = None
                        with self._stats_lock:
                            self._rearms_done += 1
                elif result is not None:
                    if isinstance(result.exception, _CONNECTION_GONE) or refused:
                        return  # the connection went again (the next reconnect redoes it), or handled
                    refused.append(result.exception)
                    pending.clear()
                if not pending:
                    if refused and result is not None and not result.successful():
                        self._forget_watches(refused[0])
                    return
                request = pending.pop(0)
            with self._stats_lock:
                self._rearm_requests += 1
            answer = self.handler.async_result()
            answer.rawlink(send_next)  # the next batch goes when this one is answered (or failed)
            self._call(request, answer)

        for _ in range(min(self.rearm_inflight, len(pending))):
            send_next()

    def _forget_watches(self, reason: BaseException) -> None:
        """The server refused to re-arm (not a lost connection): do what kazoo does, tell every watcher
        with ``NONE`` so its owner reads again, and forget them."""
        watches = sum(len(w) for w in self._data_watchers.values()) + sum(len(w) for w in self._child_watchers.values())
        log.warning("ZooKeeper refused to re-arm %s watches (%r); every watcher is told to read again", watches, reason)
        self._unconfirmed_zxid = None
        super()._reset_watchers()
