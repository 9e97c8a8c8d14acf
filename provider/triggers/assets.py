"""SealedPartitionEventTrigger: turns seals written anywhere (a Spark job, another deployment) into
Airflow asset events, for an ``AssetWatcher``; each seal is delivered until Airflow has stored it.

Delivery runs in the triggerer's shared-stream **ack mode** (Airflow 3.3): the producer reads seals in
epoch order from a cursor kept in ZooKeeper, and the triggerer calls back (``advance``) only once the
asset event of a seal is stored in the metadata database; only then does the cursor move past that
seal. A triggerer killed between a seal and its stored event therefore delivers it again after the
restart (at least once), and while one triggerer delivers a seal it holds an *ephemeral* claim on it,
so a second triggerer running the same watcher waits instead of delivering it twice; the claim goes
with the holder's session if it dies. Every event carries ``dedupe_key``
(``pipeline/partition/epoch/generation/attempt``): the one window left, a triggerer dying after
Airflow stored the event and before the cursor moved, redelivers a seal with the same key.

A re-sealed version (2, 3, ...) of a seal already delivered is delivered once more, as its own event
carrying ``version`` and ``correction``, its ``dedupe_key`` ending in ``/v<version>``: a consumer runs
once per correction of each key. Its own claim and a persistent record that Airflow stored it (see
``airflow_epochs.coordination.recipes.delivery.delivery``) keep two triggerers from delivering one
version twice. The stream looks for re-sealed versions whenever no new seal is waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer
from kazoo.client import KazooState
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.recipes.delivery.delivery import Delivery, SealToDeliver, VersionToDeliver
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.triggers.async_zk import AsyncZooKeeper
from airflow_epochs.triggers.base import TRANSIENT, ZooKeeperWatchTrigger, connection_settings
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

# What the stream hands the triggerer beside an event, and gets back once it is stored:
# (epoch, generation, claim, version, sent record); version 1 is the seal itself (no sent record).
Payload = tuple[int, int, str, int, str]


class SealStream(SharedStreamProducer):
    """The seals of one partition, in epoch order, from the committed cursor on.

    :param pipeline: pipeline name.
    :param partition: the partition to deliver.
    :param scope: the delivery scope (one per Airflow deployment: its own cursor and claims).
    :param from_epoch: the first epoch to deliver.
    """

    def __init__(self, *, pipeline: str, partition: str, scope: str, from_epoch: int,
                 zookeeper_conn_id: str, root: str) -> None:
        self.pipeline = validate_name("pipeline", pipeline)
        self.partition = validate_name("partition", partition)
        self.scope = validate_name("owner", scope)
        self.from_epoch = validate_epoch(from_epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.paths = PipelinePaths(pipeline, root)
        self.delivery = Delivery(self.paths, self.scope, self.partition, self.from_epoch)
        self.cursor = self.delivery.cursor
        self.zk: AsyncZooKeeper | None = None  # the stream's connection, once open
        self.handed: set[str] = set()  # claims of re-sealed versions handed over, not yet stored
        self.unsettled: set[str] = set()  # claims of seals handed over, not yet stored
        self._release: Any = None

    async def open_stream(self) -> AsyncIterator[tuple[dict[str, Any], Payload]]:
        settings = await connection_settings(self.zookeeper_conn_id)
        client = await SHARED_CLIENTS.acquire_async(settings)
        self._release = lambda: SHARED_CLIENTS.release(settings)
        loop = asyncio.get_running_loop()
        zk = self.zk = AsyncZooKeeper(client, loop)
        changed = asyncio.Event()
        wake = zk.watcher(lambda _event: changed.set())

        def on_state(state: str) -> bool:
            if state == KazooState.CONNECTED:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(changed.set)
            return False

        client.add_listener(on_state)
        try:
            await zk.ensure_path(DeliveryPaths(self.paths).scope(self.scope))
            following = await self.delivery.committed(zk)
            while True:
                changed.clear()
                try:
                    item = await self._next(zk, following, wake)
                except TRANSIENT:
                    await _wait(changed, 5.0)  # the session comes back: look again
                    continue
                if item is None:
                    try:
                        resealed = await self._next_version(zk, following, wake)
                    except TRANSIENT:
                        await _wait(changed, 5.0)
                        continue
                    if resealed is None:
                        await changed.wait()
                    else:
                        yield resealed
                    continue
                if isinstance(item, int):  # moved on: the cursor is past it, or the frontier moved back
                    following = item
                    continue
                self.unsettled.add(item[1][2])
                yield item
                following = item[1][0] + 1
        finally:
            client.remove_listener(on_state)
            await self.let_go_unsettled()

    async def let_go_unsettled(self) -> None:
        """Let the claims of events handed over and not confirmed go: the stream ends (Airflow did not
        store an event, the trigger is cancelled) while the process's shared session lives on, and the
        stream started after it, or another triggerer, must deliver those seals again (at least once)."""
        zk, claims = self.zk, self.unsettled | self.handed
        self.unsettled, self.handed = set(), set()
        if zk is None:
            return
        for claim in sorted(claims):
            with contextlib.suppress(*TRANSIENT):  # no session: the claim goes with it
                await self.delivery.let_go(zk, claim)

    async def _next(
        self, zk: AsyncZooKeeper, epoch: int, wake: Any
    ) -> tuple[dict[str, Any], Payload] | int | None:
        """The seal of ``epoch`` with its claim, or where to look instead, or None (wait for a watch)."""
        if await self.hold(zk, epoch, wake):
            return None
        found = await self.delivery.next_seal(zk, epoch, wake)
        if not isinstance(found, SealToDeliver):
            return found
        event = {"pipeline": self.pipeline, "partition": self.partition, "epoch": epoch,
                 "generation": found.generation, "partition_key": str(epoch), "attempt": found.attempt,
                 "zxid": found.zxid, "version": 1,
                 "dedupe_key": f"{self.pipeline}/{self.partition}/{epoch}/{found.generation}/{found.attempt}"}
        return await self.describe(zk, event), (epoch, found.generation, found.claim, 1, "")

    async def _next_version(self, zk: AsyncZooKeeper, following: int,
                            wake: Any) -> tuple[dict[str, Any], Payload] | None:
        """A re-sealed version of a seal before ``following`` not delivered yet, with its claim, or None."""
        found = await self.delivery.next_version(zk, following, wake, self.handed)
        if not isinstance(found, VersionToDeliver):
            return None
        self.handed.add(found.claim)
        key = f"{self.pipeline}/{self.partition}/{found.epoch}/{found.generation}/v{found.version}"
        event = {"pipeline": self.pipeline, "partition": self.partition, "epoch": found.epoch,
                 "generation": found.generation, "partition_key": str(found.epoch), "version": found.version,
                 "correction": found.correction, "dedupe_key": key}
        return await self.describe(zk, event), (found.epoch, found.generation, found.claim, found.version,
                                                found.sent)

    async def hold(self, zk: AsyncZooKeeper, epoch: int, wake: Any) -> bool:
        """Whether to hold the seal of ``epoch`` back for now (a subclass's seam; ``wake`` re-checks)."""
        return False

    async def describe(self, zk: AsyncZooKeeper, event: dict[str, Any]) -> dict[str, Any]:
        """The asset event's payload for a seal (a subclass's seam: e.g. another partition key)."""
        return event

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        """Airflow stored these events: move the cursor past them and drop their claims. An event not
        stored everywhere ends the stream, which starts again from the cursor (a redelivery)."""
        for item in batch:
            if not item.outcome.is_clean:
                raise RuntimeError(f"the asset event of seal {item.broker_payload[:2]} was not stored: redeliver")
        await self.settle([item.broker_payload for item in batch])

    async def settle(self, payloads: Sequence[Payload]) -> None:
        """These events are stored: record the re-sealed versions among them, then move the cursor past
        the seals (see :meth:`delivered`)."""
        zk = self.zk
        assert zk is not None
        for _epoch, _generation, claim, version, sent in payloads:
            if version > 1:
                await self.delivery.version_delivered(zk, claim, sent)
                self.handed.discard(claim)
        seals = [payload for payload in payloads if payload[3] == 1]
        if seals:
            await self.delivered(max(payload[0] for payload in seals), [payload[2] for payload in seals])
            self.unsettled.difference_update(payload[2] for payload in seals)

    async def delivered(self, epoch: int, claims: Sequence[str]) -> None:
        """Seals up to ``epoch`` are delivered: move the cursor past them and drop their claims."""
        zk = self.zk
        assert zk is not None
        await self.delivery.move_cursor(zk, epoch + 1)
        await self.delivery.drop_claims(zk, claims)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):  # closing must not fail; a claim left goes with the session
            await self.let_go_unsettled()
        if self._release is not None:
            self._release()
            self._release = None


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=seconds)


class SealedPartitionEventTrigger(ZooKeeperWatchTrigger, BaseEventTrigger):
    """Emit an asset event for each sealed epoch of ``partition``, in epoch order, from ``from_epoch``
    on, delivered until Airflow stored it (see the module's description).

    :param pipeline: pipeline name.
    :param partition: the partition to watch.
    :param scope: the delivery scope (one per Airflow deployment).
    :param from_epoch: the first epoch to report.
    """

    repeat = True

    def __init__(
        self,
        *,
        pipeline: str,
        partition: str,
        scope: str = "default",
        from_epoch: int = 1,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        self.pipeline = validate_name("pipeline", pipeline)
        self.partition = validate_name("partition", partition)
        self.scope = validate_name("owner", scope)
        self.from_epoch = validate_epoch(from_epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root

    def _kwargs(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "partition": self.partition, "scope": self.scope,
                "from_epoch": self.from_epoch, "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return "airflow_epochs.triggers.assets.SealedPartitionEventTrigger", self._kwargs()

    # -- the triggerer's shared stream, in ack mode ------------------------------------------

    def shared_stream_key(self) -> tuple[str, ...]:
        return ("airflow_epochs.seals", self.zookeeper_conn_id, self.root, self.pipeline, self.partition, self.scope,
                str(self.from_epoch))

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> SealStream:
        return SealStream(**kwargs)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        async for raw in shared_stream:
            yield TriggerEvent(raw)

    # -- without a shared stream (a triggerer that does not share, or a test loop) ------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Deliver from the cursor, moving it once each event has been handed over (no stored-event
        confirmation exists on this path: the triggerer uses the shared stream above)."""
        stream = self.create_shared_stream_producer(self._kwargs())  # a subclass's own stream kind
        try:
            async for raw, payload in stream.open_stream():
                yield TriggerEvent(raw)
                await stream.settle([payload])
        finally:
            await stream.aclose()

    async def check(self, zk: AsyncZooKeeper, wake: Any) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError("SealedPartitionEventTrigger delivers through a stream, not a check")

    def on_watch(self, event: WatchedEvent) -> None:  # pragma: no cover - see check
        pass
