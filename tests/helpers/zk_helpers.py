"""Helpers shared by the tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger


def tree(client: KazooClient, path: str = "/") -> dict[str, bytes]:
    """Every znode under ``path`` with its data: compare before and after to prove nothing changed."""
    out: dict[str, bytes] = {}

    def walk(p: str) -> None:
        data, _ = client.get(p)
        out[p] = data
        for child in client.get_children(p):
            walk(p.rstrip("/") + "/" + child)

    walk(path)
    return out


def pid_alive(pid: int) -> bool:
    """Whether a process exists (a zombie child not yet reaped still counts)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_epochs_in_order(ledger: EpochLedger, count: int) -> None:
    """The recorded history opens epochs 1..count one at a time, each only after the previous one
    is sealed, and seals each exactly once."""
    opened = sealed = 0
    for event in ledger.history():
        if event.event == "epoch_opened":
            assert event.record.epoch == sealed + 1 == opened + 1, "opened before the previous seal"
            opened = event.record.epoch
        elif event.event == "epoch_sealed":
            assert event.record.epoch == opened, "sealed an epoch that is not the open one"
            sealed = event.record.epoch
    assert (opened, sealed) == (count, count)


def fresh_chroot_client(zk_server: Any, prefix: str) -> Iterator[tuple[str, KazooClient]]:
    """Body of a fixture: a new chroot ``/tests/<prefix>-<random>`` on the tests' server (``zk_server``), and
    a started client inside it (closed at teardown); yields ``(chroot, client)``."""
    chroot = f"/tests/{prefix}-{uuid.uuid4().hex[:8]}"
    admin = zk_server.client()
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    client = zk_server.client(chroot)
    yield chroot, client
    client.stop()
    client.close()
