"""Worker functions for the race tests, importable by spawned processes."""

from __future__ import annotations

import datetime

from kazoo.client import KazooClient
from zk_test_server import connect

from airflow_epochs.coordination import Attempt, EpochLedger


def _client(hosts: str) -> KazooClient:
    client = connect(hosts, start=False)
    client.start(timeout=15)
    return client


def open_epoch(hosts: str, pipeline: str, owner: str, barrier) -> str:
    client = _client(hosts)
    try:
        barrier.wait(30)
        try:
            attempt = EpochLedger(client, pipeline, owner=owner).open_epoch(1)
        except Exception as exc:  # noqa: BLE001 - the class is the result
            return type(exc).__name__
        return f"won:{attempt.token}"
    finally:
        client.stop()


def takeover_and_seal(hosts: str, pipeline: str, owner: str, barrier) -> str:
    client = _client(hosts)
    try:
        ledger = EpochLedger(client, pipeline, owner=owner)
        barrier.wait(30)
        try:
            attempt = ledger.open_epoch(1, takeover=True)
            result = ledger.vote(attempt, "out", "job", {"by": owner})
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return f"sealed:{attempt.token}" if result.partition_sealed else "voted-unsealed"
    finally:
        client.stop()


def vote_same_attempt(hosts: str, attempt: dict, owner: str, barrier) -> str:
    client = _client(hosts)
    try:
        handle = Attempt.from_dict(attempt)
        ledger = EpochLedger(client, handle.pipeline, owner=owner)
        barrier.wait(30)
        try:
            result = ledger.vote(handle, "out", "job", {"by": owner})
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return "sealed" if result.partition_sealed else "voted-unsealed"
    finally:
        client.stop()


def lease(hosts: str, pipeline: str, owner: str, barrier) -> str:
    client = _client(hosts)
    try:
        contender = EpochLedger(client, pipeline, owner=owner).lease(duration=datetime.timedelta(seconds=60))
        barrier.wait(30)
        try:
            contender.acquire()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return "leader"
    finally:
        client.stop()
