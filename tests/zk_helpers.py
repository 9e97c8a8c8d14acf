"""Helpers shared by the tests."""

from __future__ import annotations

from kazoo.client import KazooClient


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
