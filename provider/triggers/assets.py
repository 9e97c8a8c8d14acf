"""SealedPartitionEventTrigger: turns seals written anywhere (a Spark job, another deployment) into
Airflow asset events, for an ``AssetWatcher``; each seal is delivered until Airflow has stored it.

Delivery runs in the triggerer's shared-stream **ack mode** (Airflow 3.3): the producer reads seals in
epoch order from a cursor kept in ZooKeeper, and the triggerer calls back (``advance``) only once the
asset event of a seal is stored in the metadata database; only then does the cursor move past that
seal. A triggerer killed between a seal and its stored event therefore delivers it again after the
restart (at least once), and while one triggerer delivers a seal it holds an *ephemeral* claim on it,
so a second triggerer running the same watcher waits instead of delivering it twice; the claim goes
with the holder's session if it dies. Every event is a
:class:`~airflow_epochs.coordination.recipes.delivery.records.SealedPartitionEvent` (its ``extra``, under
``payload``) carrying ``dedupe_key`` (``pipeline/partition/epoch/generation/attempt``): the one window
left, a triggerer dying after Airflow stored the event and before the cursor moved, redelivers a seal
with the same key.

A re-sealed version (2, 3, ...) of a seal already delivered is delivered once more, as its own event
carrying ``version`` and ``correction``, its ``dedupe_key`` ending in ``/v<version>``: a consumer runs
once per correction of each key. Its own claim and a persistent record that Airflow stored it (see
``airflow_epochs.coordination.recipes.delivery.delivery``) keep two triggerers from delivering one
version twice. The stream looks for re-sealed versions whenever no new seal is waiting.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, NamedTuple

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer
from kazoo.protocol.states import WatchedEvent

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper
from airflow_epochs.coordination.recipes.delivery.delivery import Delivery, Rewound, SealToDeliver, VersionToDeliver
from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent
from airflow_epochs.triggers.base import ZooKeeperWatchTrigger
from airflow_epochs.triggers.lifecycle import TRANSIENT, borrowed_session


class Handed(NamedTuple):
    """What the stream hands the triggerer beside an event, and gets back once it is stored."""

    epoch: int
    generation: int
    claim: str  # the deliverer's claim on the seal (or on the re-sealed version)
    version: int  # 1: the seal itself
    sent: str  # a re-sealed version's persistent record of delivery ("" for a seal)
    rewinds: int = 0  # the rollbacks counted when the seal was decided (the cursor moves with it)


Payload = Handed  # the name of earlier releases


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
        self.seen = 0  # the rollbacks this stream has seen (each moves its position back)
        self._session: Any = None  # the borrowed session's context, given back by aclose()

    async def open_stream(self) -> AsyncIterator[tuple[dict[str, Any], Handed]]:
        self._session = borrowed_session(self.zookeeper_conn_id)
        session = await self._session.__aenter__()
        zk = self.zk = session.store
        try:
            await self.delivery.open(zk)
            following, self.seen = await self.delivery.position(zk)
            while True:
                session.changed.clear()
                try:
                    item = await self._next(zk, following, session.wake)
                except TRANSIENT:
                    await session.changed_within(5.0)  # the session comes back: look again
                    continue
                if item is None:
                    try:
                        resealed = await self._next_version(zk, following, session.wake)
                    except TRANSIENT:
                        await session.changed_within(5.0)
                        continue
                    if resealed is None:
                        await session.changed.wait()
                    else:
                        yield resealed
                    continue
                if isinstance(item, Rewound):  # rollbacks came: their new generations are delivered again
                    following, self.seen = item.following, item.rewinds
                    continue
                if isinstance(item, int):  # moved on: the cursor is past it, or the frontier moved back
                    following = item
                    continue
                self.unsettled.add(item[1].claim)
                yield item
                following = item[1].epoch + 1
        finally:
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
    ) -> tuple[dict[str, Any], Handed] | Rewound | int | None:
        """The seal of ``epoch`` with its claim, or where to look instead, or None (wait for a watch)."""
        if await self.hold(zk, epoch, wake):
            return None
        found = await self.delivery.next_seal(zk, epoch, wake, self.seen)
        if not isinstance(found, SealToDeliver):
            return found
        event = SealedPartitionEvent(self.pipeline, self.partition, epoch, found.generation, found.attempt, found.zxid)
        handed = Handed(epoch, found.generation, found.claim, 1, "", found.rewinds)
        return (await self.describe(zk, event)).to_extra(), handed

    async def _next_version(self, zk: AsyncZooKeeper, following: int,
                            wake: Any) -> tuple[dict[str, Any], Handed] | None:
        """A re-sealed version of a seal before ``following`` not delivered yet, with its claim, or None."""
        found = await self.delivery.next_version(zk, following, wake, self.handed)
        if not isinstance(found, VersionToDeliver):
            return None
        self.handed.add(found.claim)
        event = SealedPartitionEvent(self.pipeline, self.partition, found.epoch, found.generation,
                                     version=found.version, correction=found.correction)
        return (await self.describe(zk, event)).to_extra(), Handed(found.epoch, found.generation, found.claim,
                                                                   found.version, found.sent)

    async def hold(self, zk: AsyncZooKeeper, epoch: int, wake: Any) -> bool:
        """Whether to hold the seal of ``epoch`` back for now (a subclass's seam; ``wake`` re-checks)."""
        return False

    async def describe(self, zk: AsyncZooKeeper, event: SealedPartitionEvent) -> SealedPartitionEvent:
        """The asset event's payload for a seal (a subclass's seam: e.g. another partition key)."""
        return event

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        """Airflow stored these events: move the cursor past them and drop their claims. An event not
        stored everywhere ends the stream, which starts again from the cursor (a redelivery)."""
        for item in batch:
            if not item.outcome.is_clean:
                raise RuntimeError(f"the asset event of seal {item.broker_payload[:2]} was not stored: redeliver")
        await self.settle([item.broker_payload for item in batch])

    async def settle(self, payloads: Sequence[Handed]) -> None:
        """These events are stored: record the re-sealed versions among them, then move the cursor past
        the seals (see :meth:`delivered`)."""
        zk = self.zk
        assert zk is not None
        stored = [Handed(*payload) for payload in payloads]  # a payload may come back as a plain sequence
        for handed in stored:
            if handed.version > 1:
                await self.delivery.version_delivered(zk, handed.claim, handed.sent)
                self.handed.discard(handed.claim)
        seals = [handed for handed in stored if handed.version == 1]
        if seals:
            newest = max(seals, key=lambda handed: (handed.rewinds, handed.epoch))
            await self.delivered(newest.epoch, [handed.claim for handed in seals], newest.rewinds)
            self.unsettled.difference_update(handed.claim for handed in seals)

    async def delivered(self, epoch: int, claims: Sequence[str], rewinds: int = 0) -> None:
        """Seals up to ``epoch`` are delivered (decided having seen ``rewinds`` rollbacks): move the
        cursor past them and drop their claims."""
        zk = self.zk
        assert zk is not None
        await self.delivery.move_cursor(zk, epoch + 1, rewinds)
        await self.delivery.drop_claims(zk, claims)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):  # closing must not fail; a claim left goes with the session
            await self.let_go_unsettled()
        if self._session is not None:
            session, self._session = self._session, None
            await session.__aexit__(None, None, None)


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
