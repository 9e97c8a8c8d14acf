"""The pipelines under a root: their names (the children of the root that are valid pipeline names),
for a listing, a notice naming the pipelines that do exist, and deleting a test pipeline."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from airflow_epochs.coordination.base.aio import NodeStore
from airflow_epochs.coordination.base.errors import InvalidName
from airflow_epochs.coordination.base.names import validate_name, validate_root


def _valid(names: list[str]) -> list[str]:
    found = []
    for name in sorted(names):
        try:
            found.append(validate_name("pipeline", name))
        except InvalidName:  # a node of the root that is no pipeline of ours
            continue
    return found


def pipeline_names(client: KazooClient, root: str) -> list[str]:
    """The pipeline names under ``root``, sorted (none when the root does not exist)."""
    try:
        return _valid(client.get_children(validate_root(root)))
    except NoNodeError:
        return []


async def pipeline_names_of(store: NodeStore, root: str) -> list[str]:
    """:func:`pipeline_names` on an asynchronous store."""
    return _valid(await store.children(validate_root(root)) or [])
