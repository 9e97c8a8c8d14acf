"""Triggers in Airflow's style: serialisation, firing only after the seal and promptly, one shared
kazoo session, re-reading after a reconnect, and one asset event per seal even when run twice."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, EpochNotOpen, PipelineConfig
from airflow_epochs.coordination.recipes.barriers.barrier import StragglerPolicy
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor
from airflow_epochs.triggers.assets import SealedPartitionEventTrigger
from airflow_epochs.triggers.backpressure import ConsumersCaughtUpTrigger
from airflow_epochs.triggers.barriers import BarrierReleasedTrigger
from airflow_epochs.triggers.frontier import FrontierReachedTrigger
from airflow_epochs.triggers.seals import PartitionsSealedTrigger
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

pytestmark = pytest.mark.integration





@pytest.fixture
def pipeline(zk, zk_connection):
    ledger = EpochLedger(zk, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}))
    return ledger


async def _first_event(trigger, timeout):
    """Take the first event and close the generator, as the triggerer does."""
    events = trigger.run()
    try:
        return await asyncio.wait_for(events.__anext__(), timeout)
    finally:
        await events.aclose()


def test_fires_only_after_the_seal_and_within_a_second(pipeline):
    async def scenario():
        trigger = PartitionsSealedTrigger(pipeline="p", epoch=1, partitions=["a", "b"])
        task = asyncio.create_task(_first_event(trigger, 30))
        attempt = await asyncio.to_thread(pipeline.open_epoch, 1)
        await asyncio.to_thread(pipeline.vote, attempt, "a", "x")
        await asyncio.sleep(1.0)
        assert not task.done()  # "b" is not sealed yet
        await asyncio.to_thread(pipeline.vote, attempt, "b", "y")
        sealed_at = time.monotonic()
        event = await task
        return event, time.monotonic() - sealed_at

    event, latency = asyncio.run(scenario())
    assert event.payload["status"] == "success" and set(event.payload["seals"]) == {"a", "b"}
    assert latency < 1.0


def test_consumers_trigger_fires_when_the_slowest_consumer_acknowledges(pipeline):
    for epoch in (1, 2):
        attempt = pipeline.open_epoch(epoch)
        pipeline.vote(attempt, "a", "x")
        pipeline.vote(attempt, "b", "y")
    pipeline.consumer("fast").register(acked=2)
    pipeline.consumer("slow").register(acked=0)
    pipeline.consumer("leaving").register(acked=0)

    async def scenario():
        task = asyncio.create_task(_first_event(ConsumersCaughtUpTrigger(pipeline="p", epoch=2), 30))
        await asyncio.to_thread(pipeline.consumer("slow").acknowledge, 1)
        await asyncio.sleep(1.0)
        assert not task.done()  # "slow" is at 1 and "leaving" at 0
        await asyncio.to_thread(pipeline.consumer("slow").acknowledge, 2)
        await asyncio.sleep(1.0)
        assert not task.done()  # "leaving" still holds it back
        await asyncio.to_thread(pipeline.consumer("leaving").unregister)
        left_at = time.monotonic()
        event = await task
        return event, time.monotonic() - left_at

    event, latency = asyncio.run(scenario())
    assert event.payload == {"status": "success", "pipeline": "p", "epoch": 2, "deadline": None}
    assert latency < 1.0


def test_two_triggers_share_one_session(pipeline):
    async def scenario():
        first = asyncio.create_task(_first_event(FrontierReachedTrigger(pipeline="p", epoch=1), 30))
        second = asyncio.create_task(_first_event(PartitionsSealedTrigger(pipeline="p", epoch=1, partitions=["a"]), 30))
        await asyncio.sleep(1.0)
        sessions_while_waiting = SHARED_CLIENTS.sessions()
        attempt = await asyncio.to_thread(pipeline.open_epoch, 1)
        await asyncio.to_thread(pipeline.vote, attempt, "a", "x")
        await asyncio.to_thread(pipeline.vote, attempt, "b", "y")
        await asyncio.gather(first, second)
        return sessions_while_waiting, SHARED_CLIENTS.sessions()

    during, after = asyncio.run(scenario())
    assert (during, after) == (1, 0)


def test_timeout_event_when_giving_up(pipeline):
    event = asyncio.run(_first_event(FrontierReachedTrigger(pipeline="p", epoch=1, give_up_after=0.5), 10))
    assert event.payload["status"] == "timeout"


def test_barrier_trigger_applies_the_policy_at_the_deadline(pipeline, zk):
    pipeline.open_epoch(1)
    barrier = EpochLedger(zk, "p").barrier(1, "ingested")
    barrier.declare(StragglerPolicy.quorum(1, timeout=1.0), ["x", "y"])
    barrier.arrive("x")
    event = asyncio.run(_first_event(BarrierReleasedTrigger(pipeline="p", epoch=1, barrier="ingested"), 20))
    assert (event.payload["decision"], event.payload["late"]) == ("quorum", ["y"])


def test_asset_event_trigger_emits_each_seal_once_across_two_instances(pipeline):
    async def scenario():
        events: list[dict] = []

        async def collect(trigger):
            async for event in trigger.run():
                events.append(event.payload)

        runners = [asyncio.create_task(collect(SealedPartitionEventTrigger(pipeline="p", partition="a", scope="s")))
                   for _ in range(2)]
        for epoch in (1, 2, 3):
            attempt = await asyncio.to_thread(pipeline.open_epoch, epoch)
            await asyncio.to_thread(pipeline.vote, attempt, "a", "x")
            await asyncio.to_thread(pipeline.vote, attempt, "b", "y")
        await asyncio.sleep(1.5)
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        return events

    events = asyncio.run(scenario())
    assert sorted(e["epoch"] for e in events) == [1, 2, 3]
    assert [e["partition_key"] for e in sorted(events, key=lambda e: e["epoch"])] == ["1", "2", "3"]


def test_a_stream_started_again_after_an_unstored_event_delivers_the_seal_again(pipeline):
    """Airflow did not store a seal's event (an ack timeout, no subscriber online): the stream ends and the
    triggerer starts a new one, on the same live session (another trigger holds the shared client). The
    ended stream lets its claim go, so the new one delivers the seal again instead of waiting for good."""
    from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

    from airflow_epochs.coordination import DEFAULT_ROOT
    from airflow_epochs.triggers.assets import SealStream
    from airflow_epochs.triggers.base import connection_settings

    pipeline.vote(pipeline.open_epoch(1), "a", "x")

    def stream() -> SealStream:
        return SealStream(pipeline="p", partition="a", scope="s", from_epoch=1,
                          zookeeper_conn_id="zookeeper_default", root=DEFAULT_ROOT)

    async def scenario():
        settings = await connection_settings("zookeeper_default")
        await SHARED_CLIENTS.acquire_async(settings)
        try:
            first = stream()
            events = first.open_stream()
            raw, payload = await asyncio.wait_for(events.__anext__(), 15)
            assert raw["epoch"] == 1
            with pytest.raises(RuntimeError, match="redeliver"):
                await first.advance([AdvanceItem(payload, AdvanceOutcome(acked=0, failed=1))])
            await events.aclose()
            await first.aclose()
            second = stream()
            events = second.open_stream()
            try:
                raw, payload = await asyncio.wait_for(events.__anext__(), 10)
                await second.advance([AdvanceItem(payload, AdvanceOutcome(acked=1, failed=0))])
            finally:
                await events.aclose()
                await second.aclose()
            return raw
        finally:
            SHARED_CLIENTS.release(settings)

    raw = asyncio.run(scenario())
    assert raw["epoch"] == 1 and raw["dedupe_key"].endswith("/1/1/1")
    cursor = DeliveryPaths(pipeline.paths).cursor("s", "a")
    assert DeliveryCursor.from_bytes(pipeline.client.get(cursor)[0], path=cursor).following == 2


@pytest.mark.slow
@pytest.mark.ensemble
def test_seal_made_while_disconnected_is_not_missed(ensemble, monkeypatch):
    """The trigger's client talks to member 0 only; the seal is written while member 0 is down."""
    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", ensemble.connection_json(members=[0]))
    writer = ensemble.client(members=[1, 2], start_timeout=20)
    ledger = EpochLedger(writer, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    attempt = ledger.open_epoch(1)

    async def scenario():
        task = asyncio.create_task(_first_event(PartitionsSealedTrigger(pipeline="p", epoch=1, partitions=["a"]), 60))
        await asyncio.sleep(1.0)
        await asyncio.to_thread(ensemble.kill, 0)
        await asyncio.to_thread(ledger.vote, attempt, "a", "x")
        await asyncio.sleep(0.5)
        assert not task.done()
        await asyncio.to_thread(ensemble.restart, 0)
        return await task

    try:
        event = asyncio.run(scenario())
    finally:
        writer.stop()
    assert event.payload["status"] == "success"


@pytest.mark.slow
def test_a_trigger_rides_through_a_zookeeper_restart(monkeypatch, tmp_path):
    """The (standalone) server dies with kill -9 while a deferred sensor's trigger waits, comes back
    on the same port and data 3 s later; the seal written after that wakes the trigger, which never
    failed on the lost connection."""
    from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

    server = EmbeddedZooKeeper(directory=tmp_path / "zk")
    server.start()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT",
                           json.dumps({"conn_type": "zookeeper", "host": server.hosts,
                                       "extra": {"session_timeout": 30}}))
        writer = KazooClient(hosts=server.hosts, timeout=30)
        writer.start(timeout=20)
        ledger = EpochLedger(writer, "p", owner="o")
        ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
        attempt = ledger.open_epoch(1)

        async def scenario():
            task = asyncio.create_task(_first_event(PartitionsSealedTrigger(pipeline="p", epoch=1, partitions=["a"]),
                                                    90))
            await asyncio.sleep(1.0)
            await asyncio.to_thread(server.kill, 0)
            await asyncio.sleep(3.0)
            assert not task.done()  # still waiting: the lost connection did not end it
            await asyncio.to_thread(server.restart, 0)
            await asyncio.to_thread(ledger.vote, attempt, "a", "x", None)
            sealed_at = time.monotonic()
            event = await task
            return event, time.monotonic() - sealed_at

        event, latency = asyncio.run(scenario())
        writer.stop()
        assert event.payload["status"] == "success" and latency < 5.0, (event, latency)
    finally:
        server.stop()


def test_a_seal_wait_on_an_epoch_that_already_left_zookeeper_fires(zk, zk_connection, tmp_path):
    """With an archive's default window a sealed epoch leaves ZooKeeper when the next one opens: a
    sensor deferred after that still fires (the pipeline record says the epoch is compacted, so sealed),
    and the sensor's own read of the seal is answered from the archive."""
    ledger = EpochLedger(zk, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}, archive=str(tmp_path)))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "a", "x")
    ledger.vote(attempt, "b", "y")
    ledger.open_epoch(2)
    assert ledger.compact().archived == (1,) and zk.exists(ledger.paths.epoch(1)) is None
    event = asyncio.run(_first_event(PartitionsSealedTrigger(pipeline="p", epoch=1, partitions=["a", "b"]), 30))
    assert event.payload["status"] == "success" and event.payload["compacted"] is True
    assert set(event.payload["seals"]) == {"a", "b"}
    assert ledger.seal_record(1, "a").attempt == attempt.token  # what the sensor reads on the event
    with pytest.raises(asyncio.TimeoutError):  # epoch 2 is open, not compacted: no success for it
        asyncio.run(_first_event(PartitionsSealedTrigger(pipeline="p", epoch=2, partitions=["a"]), 1.5))


def test_a_barrier_wait_on_an_epoch_that_already_left_zookeeper_reads_its_decision(zk, zk_connection, tmp_path):
    """A barrier sensor deferred after its epoch was sealed and compacted (an archive's default window)
    gets the barrier's decision from the archive, not "epoch not open"; a barrier never declared in
    that epoch is still refused."""
    ledger = EpochLedger(zk, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}, archive=str(tmp_path)))
    attempt = ledger.open_epoch(1)
    barrier = EpochLedger(zk, "p").barrier(1, "ingested")
    barrier.declare(StragglerPolicy.quorum(1, timeout=60.0), ["x", "y"])
    barrier.arrive("x")
    barrier.arrive("y")
    ledger.vote(attempt, "a", "x")
    ledger.vote(attempt, "b", "y")
    ledger.open_epoch(2)
    assert ledger.compact().archived == (1,) and zk.exists(ledger.paths.epoch(1)) is None
    event = asyncio.run(_first_event(BarrierReleasedTrigger(pipeline="p", epoch=1, barrier="ingested"), 30))
    assert (event.payload["decision"], event.payload["arrived"], event.payload["late"]) == ("all", 2, [])
    assert EpochLedger(zk, "p").barrier(1, "ingested").outcome().decision == "all"  # the core's own read, too
    with pytest.raises(EpochNotOpen):
        asyncio.run(_first_event(BarrierReleasedTrigger(pipeline="p", epoch=1, barrier="never-declared"), 30))


def test_compaction_keeps_the_seals_an_asset_deliverer_has_not_delivered(zk, zk_connection, tmp_path):
    """With an archive's default window a sealed epoch would leave ZooKeeper when the next one opens;
    a deliverer that is down meanwhile would then never find its seals. Compaction stops below the
    lowest delivery cursor, so the deliverer, back, delivers every seal; then compaction goes on."""
    ledger = EpochLedger(zk, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}, archive=str(tmp_path)))

    def seal(epoch: int) -> None:
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "a", "x")
        ledger.vote(attempt, "b", "y")

    cursor = DeliveryPaths(ledger.paths).cursor("s", "a")

    async def deliver(until: int) -> list[int]:
        """Run a deliverer until its cursor is past ``until`` (it moves once an event is handed over)."""
        seen: list[int] = []

        async def collect():
            async for event in SealedPartitionEventTrigger(pipeline="p", partition="a", scope="s").run():
                seen.append(event.payload["epoch"])

        runner = asyncio.create_task(collect())
        try:
            for _ in range(300):
                if zk.exists(cursor) and DeliveryCursor.from_bytes(zk.get(cursor)[0], path=cursor).following > until:
                    break
                await asyncio.sleep(0.1)
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        return seen

    seal(1)
    assert asyncio.run(deliver(1)) == [1]
    seal(2)
    seal(3)
    ledger.open_epoch(4)
    report = ledger.compact()
    assert report.through == 1  # the deliverer is past epoch 1 only
    assert sorted(int(n) for n in zk.get_children(ledger.paths.epochs)) == [2, 3, 4]
    assert asyncio.run(deliver(3)) == [2, 3]  # back: every seal it had not delivered
    assert ledger.compact().through == 3


def test_a_resealed_key_gives_one_event_naming_its_version_and_a_repeat_gives_none(pipeline):
    async def until(check, seconds=15.0):
        deadline = time.monotonic() + seconds
        while not check() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def scenario():
        events: list[dict] = []

        async def collect(trigger):
            async for event in trigger.run():
                events.append(event.payload)

        def start():  # two triggerers watching the same key in one scope
            return [asyncio.create_task(collect(SealedPartitionEventTrigger(pipeline="p", partition="a", scope="s")))
                    for _ in range(2)]

        async def stop(runners):
            for runner in runners:
                runner.cancel()
            await asyncio.gather(*runners, return_exceptions=True)

        runners = start()
        for epoch in (1, 2):
            attempt = await asyncio.to_thread(pipeline.open_epoch, epoch)
            await asyncio.to_thread(pipeline.vote, attempt, "a", "x", {"value": epoch})
            await asyncio.to_thread(pipeline.vote, attempt, "b", "y")
        await until(lambda: len(events) >= 2)
        opened = await asyncio.to_thread(pipeline.reseal, 1, "a", reason="late input")
        await asyncio.to_thread(pipeline.vote_version, 1, "a", opened.version, "x", {"value": 10})
        await until(lambda: len(events) >= 3)
        await asyncio.sleep(1.0)  # time for a second event, if one were to come
        await stop(runners)
        first = list(events)
        runners = start()  # the same watchers again (a triggerer restarted): nothing is delivered twice
        await asyncio.sleep(1.5)
        await stop(runners)
        return first, events, opened

    first, events, opened = asyncio.run(scenario())
    assert [(e["epoch"], e["version"]) for e in first] == [(1, 1), (2, 1), (1, 2)]
    resealed = first[2]
    assert resealed["dedupe_key"] == "p/a/1/1/v2" and resealed["correction"] == opened.correction
    assert len({e["dedupe_key"] for e in first}) == 3
    assert events == first
