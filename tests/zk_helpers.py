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
