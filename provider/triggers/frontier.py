"""FrontierReachedTrigger: fires once a pipeline's frontier reaches an epoch (watch-based)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from kazoo.client import KazooClient, KazooState

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch
from airflow_epochs.coordination.payloads import decode
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS
from airflow_epochs.zk_settings import ZooKeeperSettings


class FrontierReachedTrigger(BaseTrigger):
    """Wait until ``pipeline``'s frontier is at least ``epoch``.

    It sets a one-shot ZooKeeper watch on the frontier node and re-reads on every change and every
    reconnect (so an advance made while disconnected is not missed). Blocking kazoo calls run in
    worker threads, never on the event loop; the kazoo session is shared with every other trigger of
    this process on the same connection.

    :param pipeline: pipeline name.
    :param epoch: the epoch the frontier must reach.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    """

    def __init__(
        self, *, pipeline: str, epoch: int, zookeeper_conn_id: str = "zookeeper_default", root: str = DEFAULT_ROOT
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.paths = PipelinePaths(pipeline, root)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.frontier.FrontierReachedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "zookeeper_conn_id": self.zookeeper_conn_id,
             "root": self.root},
        )

    async def _settings(self) -> ZooKeeperSettings:
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        conn = await ZooKeeperHook.aget_connection(self.zookeeper_conn_id)
        return ZooKeeperSettings.from_fields(
            host=conn.host, port=conn.port, schema=conn.schema, login=conn.login, password=conn.password,
            extra=conn.extra_dejson,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        settings = await self._settings()
        client = await asyncio.to_thread(SHARED_CLIENTS.acquire, settings)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake(*_: Any) -> None:
            # called from kazoo's threads; the loop may be gone if the trigger was cancelled
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(changed.set)

        def on_state(state: str) -> bool:
            if state == KazooState.CONNECTED:
                wake()
            return False

        client.add_listener(on_state)
        try:
            while True:
                changed.clear()
                frontier = await asyncio.to_thread(self._read_and_watch, client, wake)
                if frontier is not None and frontier >= self.epoch:
                    yield TriggerEvent({
                        "status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "frontier": frontier,
                    })
                    return
                await changed.wait()
        finally:
            client.remove_listener(on_state)
            await asyncio.to_thread(SHARED_CLIENTS.release, settings)

    def _read_and_watch(self, client: KazooClient, wake: Any) -> int | None:
        # exists() with a watch covers a pipeline that does not exist yet
        if client.exists(self.paths.frontier, watch=wake) is None:
            return None
        data, _ = client.get(self.paths.frontier, watch=wake)
        return int(decode("frontier", data, path=self.paths.frontier)["epoch"])
