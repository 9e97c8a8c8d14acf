"""Reconfiguration at epoch boundaries, backpressure and causal lineage, on a real ZooKeeper."""

from __future__ import annotations

import threading
import time

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import (
    Backpressured,
    ConfigConflict,
    EpochLedger,
    InvalidConfig,
    InvalidInput,
    LineageItem,
    PipelineConfig,
    acknowledge,
    assignment,
    bucket_of,
    check_consistency,
    consumers,
    lineage_of,
    plan_migration,
    register_consumer,
    schedule_migration,
    unregister_consumer,
)

pytestmark = pytest.mark.integration

OLD = PipelineConfig({"out": ("job",)})
NEW = PipelineConfig({"out": ("job",), "extra": ("job2",)})


def seal(ledger, epoch):
    attempt = ledger.open_epoch(epoch)
    config = ledger.config_for(epoch).config
    for partition, producers in config.partitions.items():
        for producer in producers:
            ledger.vote(attempt, partition, producer, {"e": epoch})
    assert ledger.frontier() == epoch
    return attempt


def test_change_scheduled_three_epochs_ahead(zk):
    ledger = EpochLedger(zk, "cfg", owner="o")
    ledger.create_pipeline(OLD)
    seal(ledger, 1)
    open_attempt = ledger.open_epoch(2)  # e = 2 is open
    before = tree(zk)
    with pytest.raises(ConfigConflict, match="newest opened epoch 2"):
        ledger.set_config(NEW, from_epoch=2)  # a change for an epoch already open is refused
    assert tree(zk) == before
    version = ledger.set_config(NEW, from_epoch=5)
    assert [ledger.config_for(e).version for e in (2, 3, 4)] == [0, 0, 0]
    assert ledger.config_for(5).version == version.version
    ledger.vote(open_attempt, "out", "job")
    for epoch in (3, 4, 5):
        attempt = seal(ledger, epoch)
        assert attempt.config_version == (version.version if epoch == 5 else 0)
    assert ledger.epoch_info(5).partitions == ("extra", "out")
    assert ledger.epoch_info(4).partitions == ("out",)


def test_bucket_of_is_stable():
    assert bucket_of("JFK", 16) == bucket_of(b"JFK", 16) == bucket_of("JFK", 16)
    assert {bucket_of(f"k{i}", 16) for i in range(500)} == set(range(16))
    with pytest.raises(InvalidInput):
        bucket_of("x", 0)


def test_plan_migration_all_at_once_and_fluid():
    old = ("w1",) * 4 + ("w2",) * 4
    new = ("w1", "w2") * 4
    assert plan_migration(old, new) == [new]
    steps = plan_migration(old, new, per_epoch=1)
    assert len(steps) == 4 and steps[-1] == new
    with pytest.raises(InvalidConfig):
        plan_migration(old, new[:-1])


def test_fluid_migration_of_16_buckets_over_4_epochs_moves_each_bucket_once(zk):
    old = tuple(["a"] * 8 + ["b"] * 8)
    target = tuple(["a", "b", "c", "d"] * 4)
    ledger = EpochLedger(zk, "buckets", owner="o")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}, buckets=old))
    seal(ledger, 1)
    moving = [b for b in range(16) if old[b] != target[b]]
    versions = schedule_migration(ledger, target, from_epoch=2, per_epoch=-(-len(moving) // 4))
    assert len(versions) == 4 and [v.from_epoch for v in versions] == [2, 3, 4, 5]
    moves: dict[int, list[int]] = {}
    for epoch in range(2, 6):
        for worker in "abcd":
            got = assignment(ledger, epoch, worker)
            for bucket in got.moved_in:
                moves.setdefault(bucket, []).append(epoch)
                assert ledger.config_for(epoch - 1).config.buckets[bucket] != worker
        owners = ledger.config_for(epoch).config.buckets
        assert all(sum(b in assignment(ledger, epoch, w).owned for w in "abcd") == 1 for b in range(16))
        assert len(owners) == 16
    assert sorted(moves) == moving and all(len(epochs) == 1 for epochs in moves.values())
    assert ledger.config_for(5).config.buckets == target
    assert assignment(ledger, 6, "c").moved_in == frozenset()


def test_backpressure_window_two(zk_factory):
    producer = EpochLedger(zk_factory(), "bp", owner="producer")
    producer.create_pipeline(PipelineConfig({"out": ("job",)}, window=2))
    consumer_side = EpochLedger(zk_factory(), "bp", owner="consumer")
    register_consumer(consumer_side, "slow")  # starts at the frontier, 0
    seal(producer, 1)
    seal(producer, 2)
    with pytest.raises(Backpressured) as held:
        producer.open_epoch(3)
    assert (held.value.consumer, held.value.acked, held.value.window) == ("slow", 0, 2)

    opened = []

    def open_when_allowed():
        opened.append((producer.open_epoch(3, wait=30), time.monotonic()))

    waiter = threading.Thread(target=open_when_allowed)
    waiter.start()
    time.sleep(0.5)
    assert not opened  # still held back
    acked_at = time.monotonic()
    acknowledge(consumer_side, "slow", 1)
    waiter.join(10)
    assert opened and opened[0][0].epoch == 3
    assert opened[0][1] - acked_at < 2.0  # proceeds as soon as the consumer acknowledges
    with pytest.raises(InvalidInput, match="only epochs up to 2 are sealed"):
        acknowledge(consumer_side, "slow", 5)
    assert acknowledge(consumer_side, "slow", 0).acked == 1  # never moves back
    assert [c.consumer for c in consumers(producer)] == ["slow"]
    assert unregister_consumer(consumer_side, "slow")
    seal_attempt = producer.current_attempt(3)
    producer.vote(seal_attempt, "out", "job")
    assert producer.open_epoch(4).epoch == 4  # no consumers: no backpressure


def test_lineage_consistency(zk):
    raw = EpochLedger(zk, "raw", owner="o")
    raw.create_pipeline(PipelineConfig({"events": ("ingest",)}))
    joined = EpochLedger(zk, "joined", owner="o")
    joined.create_pipeline(PipelineConfig({"daily": ("join_a", "join_b")}))
    for epoch in (1, 2):
        raw.vote(raw.open_epoch(epoch), "events", "ingest")
    attempt = joined.open_epoch(1)
    joined.vote(attempt, "daily", "join_a", upstream={"raw": 1})
    joined.vote(attempt, "daily", "join_b", upstream={"raw": 2})
    item = lineage_of(joined, 1, "daily")
    assert item.upstream == {"raw": 2}
    good = check_consistency([lineage_of(raw, 2, "events"), item])
    assert good.consistent, good.violations
    bad = check_consistency([lineage_of(raw, 1, "events"), item])
    assert not bad.consistent and "built on raw epoch 2" in bad.violations[0]
    mixed = check_consistency([LineageItem("x", 1, "p", {"raw": 1}), LineageItem("y", 1, "q", {"raw": 2})])
    assert not mixed.consistent and "different epochs of raw" in mixed.violations[0]
    with pytest.raises(InvalidInput, match="non-negative integer"):
        joined.vote(attempt, "daily", "join_a", upstream={"raw": -1})


@pytest.mark.parametrize("forged", [{"consumer": "report"}, {"consumer": "report", "acked": "3"}, True,
                                    {"consumer": "other", "acked": 2}])
def test_a_repeated_registration_reads_its_stored_result_as_a_record(zk, forged):
    """The repeat of a registration whose consumer is gone again reads the stored result through a
    record: a result that is not a registration of this consumer (forged, or another call's) is
    answered as a corrupt record naming its znode, never a KeyError or a wrong acknowledgement."""
    from airflow_epochs.coordination import CorruptPayload
    from airflow_epochs.coordination.base.paths import PipelinePaths
    from airflow_epochs.coordination.wire.nodes import RequestNode

    ledger = EpochLedger(zk, "bpstored", owner="tests")
    ledger.create_pipeline(OLD)
    assert register_consumer(ledger, "report", acked=0, request_id="reg-1").acked == 0
    assert unregister_consumer(ledger, "report")
    again = register_consumer(ledger, "report", acked=0, request_id="reg-1")  # found, not redone
    assert (again.acked, again.overtaken is not None) == (0, True)
    path = PipelinePaths("bpstored").request("reg-1")
    zk.set(path, RequestNode("register_consumer", time.time(), forged).to_bytes())
    with pytest.raises(CorruptPayload, match="reg-1"):
        register_consumer(ledger, "report", acked=0, request_id="reg-1")
    assert [c.consumer for c in consumers(ledger)] == []  # nothing was registered by the repeat
