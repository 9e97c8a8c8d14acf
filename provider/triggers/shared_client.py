"""One kazoo session per connection per process, shared by every trigger of a triggerer.

A triggerer may run a thousand deferred sensors; each holding its own ZooKeeper session would cost
a thousand sessions (and their heartbeats) on the ensemble. Triggers borrow a reference-counted
client instead; the last one to give it back closes it. The registry's lock is only ever held for
bookkeeping: connecting happens outside it, so one unreachable ensemble never stalls the triggers
of another connection.

The shared client is a :class:`~airflow_epochs.triggers.rearming_client.RearmingKazooClient`: after a
lost connection it re-arms every trigger's watches in a few SetWatches requests instead of waking
them all to read again, and it bounds how many reads the triggers have in flight.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.triggers.rearming_client import RearmingKazooClient


@dataclass
class _Entry:
    client: KazooClient | None  # None until the first borrower has connected it
    refs: int
    started: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class SharedClients:
    """A process-wide registry of started clients, keyed by connection settings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @staticmethod
    def key(settings: ZooKeeperSettings) -> str:
        # The key includes the credentials (hashed) so two connections to the same hosts with other
        # users never share a session.
        material = json.dumps(settings.kazoo_kwargs(), sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    def acquire(self, settings: ZooKeeperSettings) -> KazooClient:
        """Borrow the started client for ``settings`` (blocking: call it off the event loop).

        The first borrower connects; others wait for that connection, without holding the lock.
        """
        key = self.key(settings)
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if entry is None:
                entry = _Entry(None, 0)
                self._entries[key] = entry
            entry.refs += 1
        if first:
            try:
                # TLS-aware start: a refused certificate is a clear configuration error at once.
                entry.client = settings.start_client(client_class=RearmingKazooClient)
            except BaseException as exc:
                entry.error = exc
                with self._lock:
                    if self._entries.get(key) is entry:
                        del self._entries[key]
                entry.started.set()
                raise
            entry.started.set()
        else:
            entry.started.wait(settings.connection_timeout + 1)
            if entry.error is not None or entry.client is None:
                self._drop(key, entry)
                raise entry.error or KazooTimeoutError("the shared ZooKeeper client did not start in time")
        return entry.client

    async def acquire_async(self, settings: ZooKeeperSettings) -> KazooClient:
        """:meth:`acquire` for code on an event loop (connecting runs in a worker thread)."""
        return await asyncio.to_thread(self.acquire, settings)

    def _drop(self, key: str, entry: _Entry) -> None:
        """Give back the reference of a borrower whose wait for the connection failed: the last
        reference removes the entry, so the next borrower connects afresh."""
        with self._lock:
            entry.refs -= 1
            if entry.refs > 0:
                return
            if self._entries.get(key) is entry:
                del self._entries[key]
        self._close_later(entry)

    def release(self, settings: ZooKeeperSettings) -> None:
        """Give a borrowed client back; the last release closes it.

        Never blocks: it runs in a cancelled trigger's ``finally`` on the event loop, so the closing
        itself happens in a background thread.
        """
        key = self.key(settings)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.refs -= 1
            if entry.refs > 0:
                return
            del self._entries[key]
        self._close_later(entry)

    @staticmethod
    def _close_later(entry: _Entry) -> None:
        """Close the entry's client (once it started) in a background thread: never blocks."""

        def close() -> None:
            entry.started.wait(30)
            if entry.client is not None:
                entry.client.stop()
                entry.client.close()

        threading.Thread(target=close, name="airflow-epochs-zk-close", daemon=True).start()

    def sessions(self) -> int:
        """How many ZooKeeper sessions this process holds through the registry."""
        with self._lock:
            return len(self._entries)


SHARED_CLIENTS = SharedClients()
