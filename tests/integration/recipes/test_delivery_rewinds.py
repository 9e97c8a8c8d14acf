"""Every generation delivered once: a seal the delivery cursor had passed and that a rollback undid is
delivered again in its new generation, once per delivery scope, with two deliverers, with a late
confirmation from before the rollback, and after compaction trimmed what every cursor had seen."""

from __future__ import annotations

import asyncio

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.base.aio import AsyncZooKeeper
from airflow_epochs.coordination.recipes.delivery.delivery import Delivery, SealToDeliver
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor, DeliveryRewinds
from airflow_epochs.triggers.assets import SealedPartitionEventTrigger

pytestmark = pytest.mark.integration


@pytest.fixture
def pipeline(zk, zk_connection):
    ledger = EpochLedger(zk, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    return ledger


def _seal(ledger: EpochLedger, epoch: int) -> None:
    ledger.vote(ledger.open_epoch(epoch), "a", "x")


async def _until(events: list[dict], count: int, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while len(events) < count and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


def _run_watchers(ledger: EpochLedger, watchers: int) -> list[tuple[int, int]]:
    """Seal 1 and 2, wait until both are delivered, roll back to 1, seal 2 again and 3: the
    (epoch, generation) of every event the ``watchers`` of one scope delivered."""

    async def scenario() -> list[dict]:
        events: list[dict] = []

        async def collect() -> None:
            async for event in SealedPartitionEventTrigger(pipeline="p", partition="a", scope="s").run():
                events.append(event.payload)

        runners = [asyncio.create_task(collect()) for _ in range(watchers)]
        for epoch in (1, 2):
            await asyncio.to_thread(_seal, ledger, epoch)
        await _until(events, 2)
        await asyncio.to_thread(ledger.rollback, 1, reason="a corrected feed")
        for epoch in (2, 3):
            await asyncio.to_thread(_seal, ledger, epoch)
        await _until(events, 4)
        await asyncio.sleep(1.0)  # room for a duplicate to show
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        return events

    return sorted((e["epoch"], e["generation"]) for e in asyncio.run(scenario()))


def test_a_rolled_back_epoch_is_delivered_again_in_its_new_generation(pipeline):
    assert _run_watchers(pipeline, 1) == [(1, 1), (2, 1), (2, 2), (3, 1)]


def test_two_deliverers_of_one_scope_deliver_each_generation_once(pipeline):
    assert _run_watchers(pipeline, 2) == [(1, 1), (2, 1), (2, 2), (3, 1)]


def test_a_late_confirmation_from_before_a_rollback_never_carries_the_cursor_past_the_new_generation(zk, pipeline):
    """Deliverer A hands epoch 2 (generation 1) over and stalls (its session expired while Airflow stored
    the event); a rollback undoes epoch 2, and deliverer B delivers its new generation; A then confirms:
    the cursor must stay where B left it, and a third deliverer must not deliver generation 2 again."""
    for epoch in (1, 2):
        _seal(pipeline, epoch)

    async def scenario() -> tuple[SealToDeliver, SealToDeliver, object, DeliveryCursor]:
        store = AsyncZooKeeper(zk, asyncio.get_running_loop())
        a, b, c = (Delivery(pipeline.paths, "s", "a", 1) for _ in range(3))
        await a.open(store)
        first = await a.next_seal(store, 1, lambda _e: None)
        assert isinstance(first, SealToDeliver)
        await a.move_cursor(store, 2, first.rewinds)
        await a.drop_claims(store, [first.claim])
        stalled = await a.next_seal(store, 2, lambda _e: None)
        assert isinstance(stalled, SealToDeliver) and (stalled.generation, stalled.rewinds) == (1, 0)
        await a.let_go(store, stalled.claim)  # its session ended: the claim went with it
        await asyncio.to_thread(pipeline.rollback, 1, reason="a corrected feed")
        await asyncio.to_thread(_seal, pipeline, 2)
        following, seen = await b.position(store)
        assert (following, seen) == (2, 1)  # the cursor (2, 0 rollbacks seen) reads as back at 2
        fresh = await b.next_seal(store, 2, lambda _e: None, seen)
        assert isinstance(fresh, SealToDeliver) and (fresh.generation, fresh.rewinds) == (2, 1)
        await b.move_cursor(store, 3, fresh.rewinds)
        await b.drop_claims(store, [fresh.claim])
        await a.move_cursor(store, 3, stalled.rewinds)  # the late confirmation of generation 1
        raw = await store.get(a.cursor)
        assert raw is not None
        following, seen = await c.position(store)
        return stalled, fresh, (following, seen), DeliveryCursor.from_bytes(raw[0], path=a.cursor)

    _stalled, _fresh, position, cursor = asyncio.run(scenario())
    assert (cursor.following, cursor.rewinds) == (3, 1)  # B's move stands
    assert position == (3, 1)  # nothing of epoch 2 is delivered again


def test_compaction_forgets_the_rollbacks_every_cursor_has_seen(zk, pipeline):
    pipeline.set_config(PipelineConfig({"a": ("x",)}, retain_epochs=1), from_epoch=2)
    _seal(pipeline, 1)
    for to in (1, 1):
        _seal(pipeline, 2)
        pipeline.rollback(to, reason="again")
    for epoch in (2, 3, 4):
        _seal(pipeline, epoch)
    rewinds_path = DeliveryPaths(pipeline.paths).rewinds
    assert DeliveryRewinds.from_bytes(zk.get(rewinds_path)[0], path=rewinds_path).entries == ((1, 1), (2, 1))

    async def deliver_to(epoch: int) -> None:
        store = AsyncZooKeeper(zk, asyncio.get_running_loop())
        delivery = Delivery(pipeline.paths, "s", "a", 1)
        await delivery.open(store)
        _following, seen = await delivery.position(store)
        await delivery.move_cursor(store, epoch + 1, seen)

    asyncio.run(deliver_to(4))
    report = pipeline.compact()
    assert report.trimmed.get("delivery") == 2
    after = DeliveryRewinds.from_bytes(zk.get(rewinds_path)[0], path=rewinds_path)
    assert (after.count, after.entries) == (2, ())


def test_a_planted_persistent_claim_does_not_stall_the_scope(zk, pipeline):
    """Claims are ephemeral: a persistent node at a claim's path (planted by an identity with write rights to
    the scope) is no deliverer's; it is deleted and the seal delivered, instead of every deliverer waiting for
    it for ever."""
    _seal(pipeline, 1)
    claim = DeliveryPaths(pipeline.paths).claim("s", 1, 1, "a")
    zk.ensure_path(DeliveryPaths(pipeline.paths).scope("s"))
    zk.create(claim, b"planted")

    async def scenario() -> object:
        store = AsyncZooKeeper(zk, asyncio.get_running_loop())
        delivery = Delivery(pipeline.paths, "s", "a", 1)
        for _ in range(3):
            found = await delivery.next_seal(store, 1, lambda _e: None)
            if isinstance(found, SealToDeliver):
                return found
        return found

    found = asyncio.run(scenario())
    assert isinstance(found, SealToDeliver) and found.epoch == 1
    data, stat = zk.get(claim)
    assert stat.ephemeralOwner != 0 and data != b"planted"


def test_a_forged_cursor_past_the_frontier_is_refused_not_followed(zk, pipeline):
    """A cursor no deliverer could have written (past the frontier + 2) would skip seals silently: the
    delivery refuses it, naming it, and delivers nothing."""
    from airflow_epochs.coordination import CorruptPayload

    _seal(pipeline, 1)
    cursor = DeliveryPaths(pipeline.paths).cursor("s", "a")
    zk.ensure_path(DeliveryPaths(pipeline.paths).scope("s"))
    zk.create(cursor, DeliveryCursor(50, 0).to_bytes())

    async def scenario() -> None:
        store = AsyncZooKeeper(zk, asyncio.get_running_loop())
        await Delivery(pipeline.paths, "s", "a", 1).next_seal(store, 1, lambda _e: None)

    with pytest.raises(CorruptPayload, match="past the frontier"):
        asyncio.run(scenario())
