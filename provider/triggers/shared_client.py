"""One kazoo session per connection per process, shared by every trigger of a triggerer.

A triggerer may run a thousand deferred sensors; each holding its own ZooKeeper session would cost
a thousand sessions (and their heartbeats) on the ensemble. Triggers borrow a reference-counted
client instead; the last one to give it back closes it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient

from airflow_epochs.zk_settings import ZooKeeperSettings


@dataclass
class _Entry:
    client: KazooClient
    refs: int


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
        """Borrow the started client for ``settings`` (blocking: call it off the event loop)."""
        key = self.key(settings)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                client = settings.client()
                client.start(timeout=settings.connection_timeout)
                entry = _Entry(client, 0)
                self._entries[key] = entry
            entry.refs += 1
            return entry.client

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

        def close() -> None:
            entry.client.stop()
            entry.client.close()

        threading.Thread(target=close, name="airflow-epochs-zk-close", daemon=True).start()

    def sessions(self) -> int:
        """How many ZooKeeper sessions this process holds through the registry."""
        with self._lock:
            return len(self._entries)


SHARED_CLIENTS = SharedClients()
