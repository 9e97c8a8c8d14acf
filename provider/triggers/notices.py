"""What a waiting trigger says while it waits on something that may never come: a pipeline that does not
exist (a typo waits as long as a real wait) or an epoch far past the frontier.

A wait is not failed for these (a downstream DAG may start before its pipeline's first epoch, and a
later epoch is a legitimate wait); a missing pipeline is said at once, an epoch far past the frontier
after the first :data:`NOTICE_EVERY` seconds, and both again every :data:`NOTICE_EVERY` seconds, in the
trigger's log (the task's ``.trigger`` log, or the console of ``airflow dags test``).
"""

from __future__ import annotations

from airflow_epochs.coordination import InvalidName, PipelinePaths, validate_name
from airflow_epochs.coordination.wire.nodes import FrontierNode
from airflow_epochs.triggers.async_zk import AsyncZooKeeper

__all__ = ["FAR_PAST_FRONTIER", "NOTICE_EVERY", "pipeline_notice"]

NOTICE_EVERY = 300.0  # seconds between two notices of the same wait
FAR_PAST_FRONTIER = 2  # an awaited epoch this many epochs past the frontier (or more) is said
MAX_NAMED = 12  # pipelines a notice names (a root may hold thousands)


async def existing_pipelines(zk: AsyncZooKeeper, root: str) -> list[str]:
    """The pipeline names under ``root`` (children that are valid names), sorted."""
    names = await zk.children(root) or []
    found = []
    for name in sorted(names):
        try:
            found.append(validate_name("pipeline", name))
        except InvalidName:
            continue
    return found


async def pipeline_notice(zk: AsyncZooKeeper, paths: PipelinePaths, *, root: str, epoch: int,
                          waiting_for: str, first: bool = False) -> str | None:
    """One line on why ``waiting_for`` may wait long, or None when nothing looks wrong: the pipeline is
    missing (said from the ``first`` look on), or ``epoch`` is far past its frontier (said from the second
    look on: catch-up runs wait a few epochs ahead as a matter of course)."""
    if await zk.exists(paths.base) is None:
        others = await existing_pipelines(zk, root)
        there = (f"pipelines there: {', '.join(others[:MAX_NAMED])}{' ...' if len(others) > MAX_NAMED else ''}"
                 if others else "no pipeline exists there yet")
        return (f"still waiting for {waiting_for}: pipeline {paths.pipeline!r} does not exist under {root} ({there}); "
                "a typo in the name waits until the task's timeout")
    node = await zk.get(paths.frontier)
    if node is None or first:
        return None
    frontier = FrontierNode.from_bytes(node[0], path=paths.frontier).epoch
    if epoch - frontier >= FAR_PAST_FRONTIER:
        return (f"still waiting for {waiting_for}: the pipeline's frontier is at epoch {frontier}, {epoch - frontier} "
                f"epochs before epoch {epoch}")
    return None
