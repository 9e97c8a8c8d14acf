"""What ZooKeeper says a request did, read straight from the znodes (no library code), for the
outcome tests: the whole chroot as text, and per call family whether a committed request is still
current (its answer must then carry no ``overtaken`` flag) or was overtaken (it must carry one)."""

from __future__ import annotations

import json
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.wire import payloads


def dump(zk: KazooClient, top: str = "/") -> dict[str, bytes]:
    """Every znode under ``top`` with its data (the test's chroot is small), read level by level with
    pipelined requests."""
    out: dict[str, bytes] = {}
    level = [top]
    while level:
        pending = [(path, zk.get_async(path), zk.get_children_async(path)) for path in level]
        level = []
        for path, data, children in pending:
            try:
                out[path] = data.get(timeout=15)[0]
                names = children.get(timeout=15)
            except NoNodeError:
                continue
            level.extend(f"{path.rstrip('/')}/{child}" for child in names)
    return out


def on_record(zk: KazooClient, request_id: str) -> bool:
    """Whether ``request_id`` appears in any znode's name or data."""
    needle = request_id.encode()
    return any(needle in path.encode() or needle in data for path, data in dump(zk).items())


def doc(zk: KazooClient, path: str) -> dict[str, Any] | None:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    loaded: Any = json.loads(data)
    if isinstance(loaded, list) and loaded[:2] == [2, "vote"]:  # a vote znode's compact form, as an object
        request, voted_at, manifest, *extra = loaded[2:]
        return {"schema": 2, "kind": "vote", "request": request, "voted_at": voted_at, "manifest": manifest,
                **(extra[0] if extra else {})}
    found: dict[str, Any] = loaded
    return found


def attempt_is_current(epoch_doc: dict[str, Any] | None, attempt_doc: dict[str, Any] | None, token: int,
                       generation: int) -> bool:
    """The attempt is the epoch's running attempt of its current opening (votes under it count)."""
    return bool(epoch_doc and attempt_doc and epoch_doc["state"] == "open" and epoch_doc["attempt"] == token
                and epoch_doc["generation"] == generation and attempt_doc["state"] == "running")


def attempt_sealed_epoch(epoch_doc: dict[str, Any] | None, attempt_doc: dict[str, Any] | None, token: int,
                         generation: int) -> bool:
    return bool(epoch_doc and epoch_doc["state"] == "sealed" and epoch_doc["attempt"] == token
                and epoch_doc["generation"] == generation and attempt_doc and attempt_doc["state"] == "running")


def dead_vote(zk: KazooClient, ledger: EpochLedger, attempt, partition: str, producer: str) -> None:
    """The state a voter leaves when it dies between its vote and the seal it should have written:
    its vote transaction (vote znode, counter bump) committed, nothing after it."""
    vote = payloads.encode("vote", {"producer": producer, "attempt": attempt.token, "manifest": {}, "snapshot": None,
                                    "upstream": {}, "voted_at": time.time(), "request": f"dead-{producer}"})
    tx = zk.transaction()
    tx.create(ledger.paths.vote(attempt.epoch, attempt.token, partition, producer), vote)
    tx.set_data(ledger.paths.vote_counter(attempt.epoch, attempt.token, partition), b"", -1)
    assert all(not isinstance(r, Exception) for r in tx.commit())
