"""Watches through a lost connection without a storm: the re-arming kazoo client (SetWatches with the
last zxid seen) against a real server behind a proxy that cuts the connection, and a few hundred
deferred triggers riding through a leader failover on a 3-node ensemble."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from typing import Any

import pytest
from kazoo.protocol.states import EventType, WatchedEvent
from zk_proxy import LostAnswerProxy

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.triggers.async_zk import AsyncZooKeeper, Watch
from airflow_epochs.triggers.rearming_client import RearmingKazooClient
from airflow_epochs.triggers.seals import PartitionsSealedTrigger
from airflow_epochs.triggers.shared_client import SHARED_CLIENTS

pytestmark = pytest.mark.integration


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)






def test_watches_survive_a_cut_connection_and_report_what_changed_meanwhile(zk_server, zk_chroot, zk):
    """200 exists watches and a data watch; the connection is cut and kept down while 50 of the nodes
    are created and the data node changes; once back, one SetWatches request re-arms them all, the
    server fires exactly the 51 changed ones (each once), and the others fire later, once each."""
    proxy = LostAnswerProxy(zk_server)
    client = proxy.client(zk_chroot, client_class=RearmingKazooClient, start=False, timeout=30,
                                 connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
    client.start(timeout=15)
    events: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()

    def watch(event: WatchedEvent) -> None:
        with lock:
            events[(event.type, event.path or "")] += 1

    try:
        zk.ensure_path("/w")
        zk.create("/data", b"0")
        for i in range(200):
            assert client.exists(f"/w/n{i:03d}", watch=watch) is None
        client.get("/data", watch=watch)
        client.reset_stats()
        proxy.block(600)
        proxy.cut()
        _wait_for(lambda: not client.connected, 15, "the client to notice the cut")
        for i in range(50):
            zk.create(f"/w/n{i:03d}")
        zk.set("/data", b"1")
        time.sleep(0.5)
        assert sum(events.values()) == 0  # no NONE storm on the lost connection
        proxy.unblock()
        _wait_for(lambda: len(events) == 51, 30, "the changes made meanwhile to be reported")
        created = {path for (kind, path), n in events.items() if kind == EventType.CREATED and n == 1}
        assert created == {f"/w/n{i:03d}" for i in range(50)}
        assert events[(EventType.CHANGED, "/data")] == 1
        stats = client.stats()
        assert stats["rearm_requests"] == 1 and stats["rearms"] == 1, stats
        assert stats["requests"] == 1, stats  # nothing but the SetWatches
        for i in range(50, 200):
            zk.create(f"/w/n{i:03d}")
        _wait_for(lambda: len(events) == 201, 30, "the later creations")
        assert set(events.values()) == {1}
        assert EventType.NONE not in {kind for kind, _ in events}
    finally:
        client.stop()
        client.close()
        proxy.close()


def test_a_lost_session_still_tells_every_watcher(zk_server, zk_chroot):
    """When the session itself expired, the server forgot the watches: every watcher hears NONE (as
    with kazoo) so its owner reads again, and nothing is re-armed."""
    proxy = LostAnswerProxy(zk_server)
    client = proxy.client(zk_chroot, client_class=RearmingKazooClient, start=False, timeout=4,
                                 connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
    client.start(timeout=15)
    heard: list[WatchedEvent] = []
    try:
        for i in range(5):
            client.exists(f"/gone{i}", watch=heard.append)
        proxy.block(600)
        proxy.cut()
        time.sleep(9)  # past the session timeout: the server expires the session
        assert heard == []
        proxy.unblock()
        _wait_for(lambda: len(heard) == 5, 30, "the NONE events")
        assert {e.type for e in heard} == {EventType.NONE}
        assert client.stats()["rearms"] == 0
    finally:
        client.stop()
        client.close()
        proxy.close()


def test_a_refused_rearm_falls_back_to_telling_every_watcher(zk_server, zk_chroot, zk, monkeypatch):
    """If the server answers the re-arm with an error (not a lost connection), the watches are not
    silently gone: every watcher hears NONE, as with kazoo, so its owner reads again. The refusal is
    provoked by re-arming with a request the server refuses (a delete of a missing node)."""
    from kazoo.protocol.serialization import Delete

    from airflow_epochs.triggers import rearming_client

    proxy = LostAnswerProxy(zk_server)
    client = proxy.client(zk_chroot, client_class=RearmingKazooClient, start=False, timeout=30,
                                 connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
    client.start(timeout=15)
    heard: list[WatchedEvent] = []
    try:
        for i in range(3):
            client.exists(f"/never{i}", watch=heard.append)
        monkeypatch.setattr(rearming_client, "set_watches_batches",
                            lambda *args, **kwargs: iter([Delete(zk_chroot + "/missing", -1)]))
        proxy.block(600)
        proxy.cut()
        _wait_for(lambda: not client.connected, 15, "the cut")
        proxy.unblock()
        _wait_for(lambda: len(heard) == 3, 30, "the NONE events after the refusal")
        assert {e.type for e in heard} == {EventType.NONE}
        assert client.watched_paths() == ([], [], [])
    finally:
        client.stop()
        client.close()
        proxy.close()


class _CountingSealTrigger(PartitionsSealedTrigger):
    """Counts the watch events it hears per path, and its checks."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heard: Counter[tuple[str, str]] = Counter()
        self.checks = 0

    def on_watch(self, event: WatchedEvent) -> None:
        self.heard[(event.type, event.path or "")] += 1
        super().on_watch(event)

    async def check(self, zk: AsyncZooKeeper, wake: Watch) -> dict[str, Any] | None:
        self.checks += 1
        return await super().check(zk, wake)


@pytest.mark.slow
@pytest.mark.ensemble
def test_triggers_ride_a_leader_failover_without_a_storm(ensemble, monkeypatch):
    """240 deferred triggers (a partition each) share one session to a follower (through a proxy that can refuse the
    reconnect). The leader is killed; while the triggerer is away, 80 partitions are sealed; then it
    reconnects: its watches come back in a handful of SetWatches requests, never more than the bound in
    flight, the 80 fire, the other 160 fire when sealed later, each trigger exactly once, and no
    trigger heard a NONE event or re-read because of the reconnect."""
    n, during = 240, 80
    leader = ensemble.leader()
    follower = next(i for i in range(3) if i != leader)
    proxy = LostAnswerProxy(ensemble.member(follower))  # TLS on both sides, our certificate required
    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", json.dumps(proxy.connection(session_timeout=40)))
    writer = ensemble.client(timeout=30, start_timeout=20)
    partitions = [f"p{i:03d}" for i in range(n)]
    ledger = EpochLedger(writer, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({p: ("x",) for p in partitions}))
    attempt = ledger.open_epoch(1)
    triggers = [_CountingSealTrigger(pipeline="p", epoch=1, partitions=[p]) for p in partitions]

    async def scenario() -> tuple[list[list[Any]], dict[str, int], dict[str, int], dict[str, int]]:
        fired: list[list[Any]] = [[] for _ in triggers]

        async def run(index: int) -> None:
            async for event in triggers[index].run():
                fired[index].append(event.payload)

        tasks = [asyncio.create_task(run(i)) for i in range(n)]
        while SHARED_CLIENTS.sessions() == 0 or not all(t.checks for t in triggers):
            await asyncio.sleep(0.1)
        client = SHARED_CLIENTS.acquire(await _settings())
        try:
            assert isinstance(client, RearmingKazooClient)
            await asyncio.to_thread(_wait_for, lambda: len(client.watched_paths()[1]) >= n, 60, "armed waits")
            arming = client.stats()
            client.reset_stats()
            checks_before = sum(t.checks for t in triggers)
            proxy.block(600)
            await asyncio.to_thread(ensemble.kill, leader)
            await asyncio.to_thread(_wait_for, lambda: not client.connected, 30, "the failover to reach us")
            await asyncio.to_thread(ensemble.wait_serving, [i for i in range(3) if i != leader])
            for p in partitions[:during]:
                await asyncio.to_thread(ledger.vote, attempt, p, "x")
            assert not any(fired)
            proxy.unblock()
            while sum(1 for f in fired if f) < during:
                await asyncio.sleep(0.1)
            after_failover = client.stats()
            assert sum(t.checks for t in triggers) - checks_before == during, "only the sealed ones looked again"
            for p in partitions[during:]:
                await asyncio.to_thread(ledger.vote, attempt, p, "x")
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
            return fired, arming, after_failover, client.stats()
        finally:
            SHARED_CLIENTS.release(await _settings())

    try:
        fired, arming, after_failover, final = asyncio.run(scenario())
    finally:
        writer.stop()
        writer.close()
        proxy.close()
        ensemble.restart(leader)
    assert all(len(f) == 1 and f[0]["status"] == "success" for f in fired)
    for trigger, partition in zip(triggers, partitions, strict=True):
        seal_path = trigger.watch.paths.seal(1, attempt.generation, partition)
        assert trigger.heard[(EventType.CREATED, seal_path)] == 1, (partition, trigger.heard)
        assert not any(kind == EventType.NONE for kind, _ in trigger.heard), trigger.heard
    assert 1 <= after_failover["rearm_requests"] <= 3, after_failover
    # the re-arm and the wakes together, per waiter: a handful of SetWatches over 300 waits
    assert after_failover["requests"] <= after_failover["rearm_requests"] + during, after_failover
    # 240 triggers arming at once went through the gate: never more than its bound outstanding
    assert arming["requests"] >= 2 * n and arming["inflight_max"] <= 32, arming
    assert final["inflight_max"] <= 32 + 2, final


async def _settings() -> Any:
    from airflow_epochs.triggers.base import connection_settings

    return await connection_settings("zookeeper_default")
