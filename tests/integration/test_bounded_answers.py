"""No ZooKeeper answer the library asks for grows with the pipeline, on a real ZooKeeper.

A spy on the kazoo client records every ``getChildren`` answer (its size on the wire: 4 bytes of
count, then 4 bytes of length and the name for each child) while a pipeline is driven past the
counts that would make a listing large: many more history events than one probe batch covers,
compaction pruning them, barriers with many participants, many consumers, many staged epochs. The
largest answer is then checked against the bound the "Bounded answers"
table of docs/reference/zookeeper_layout.rst states, and
every limit that keeps a listing bounded refuses the value past it, naming it, before any write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from zk_helpers import tree

import airflow_epochs.coordination.base.names as names
import airflow_epochs.coordination.protocol.config_store as config_store
import airflow_epochs.coordination.recipes.backpressure.consumers as backpressure
import airflow_epochs.coordination.recipes.barriers.barrier as barriers
import airflow_epochs.coordination.state.history as history
import airflow_epochs.coordination.state.pipeline as pipeline_module
import airflow_epochs.coordination.wire.config as config
from airflow_epochs.coordination import (
    BarrierFull,
    ConfigConflict,
    EpochLedger,
    InvalidConfig,
    InvalidInput,
    PipelineConfig,
    StragglerPolicy,
    TooManyAttempts,
    TooManyConsumers,
    TooManyRequests,
)
from airflow_epochs.coordination.base.paths import epoch_key
from airflow_epochs.coordination.declared.staging import staged_votes
from airflow_epochs.coordination.declared.votes import TaskInstanceId, drain, stage_vote
from airflow_epochs.coordination.wire.declared import DeclaredProducers, ExplicitKeys, Match, TaskProducer

pytestmark = [pytest.mark.integration]


def listing_bytes(names: list[str]) -> int:
    """The size of a getChildren answer's list on the wire (jute: count, then length + bytes each)."""
    return 4 + sum(4 + len(name.encode()) for name in names)


class ListingSpy:
    """Records the path and size of every getChildren answer of one kazoo client."""

    def __init__(self, client: KazooClient) -> None:
        self.answers: list[tuple[str, int]] = []
        real = client.get_children_async

        def spy(path: str, watch: Any = None, include_data: bool = False) -> Any:
            pending = real(path, watch=watch, include_data=include_data)
            pending.rawlink(lambda done: self._record(path, done))
            return pending

        client.get_children_async = spy  # type: ignore[method-assign]

    def _record(self, path: str, done: Any) -> None:
        if done.successful():
            names = done.value[0] if isinstance(done.value, tuple) else done.value
            self.answers.append((path, listing_bytes(list(names))))

    def largest(self) -> int:
        return max((size for _, size in self.answers), default=0)

    def paths(self) -> set[str]:
        return {path for path, _ in self.answers}


@pytest.fixture
def spied(zk_factory: Callable[..., KazooClient]) -> Iterator[tuple[KazooClient, ListingSpy]]:
    client = zk_factory()
    yield client, ListingSpy(client)


def _epoch(ledger: EpochLedger, epoch: int) -> None:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "events", "ingest", {"e": epoch})
    ledger.vote(attempt, "totals", "sum", {"e": epoch})


def _live_sequences(zk: KazooClient, ledger: EpochLedger) -> list[int]:
    """What the history holds, listed by the test itself (not through the spied client)."""
    return sorted(int(name[2:]) for name in zk.get_children(ledger.paths.history))


def test_history_is_never_listed_however_many_events_and_reads_stay_exact(spied, zk, monkeypatch):
    client, spy = spied
    monkeypatch.setattr(history, "PROBE_BATCH", 16)  # small, so the reads cross many probe batches
    ledger = EpochLedger(client, "long", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=None))
    for epoch in range(1, 41):
        _epoch(ledger, epoch)
    live = _live_sequences(zk, ledger)
    assert len(live) > 8 * history.PROBE_BATCH  # 161 events: far more than one probe batch
    assert [e.seq for e in ledger.history()] == live
    middle = live[len(live) // 2]
    assert [e.seq for e in ledger.history(since_seq=middle)] == [s for s in live if s > middle]
    assert [e.seq for e in ledger.history(since_seq=middle, limit=5)] == [s for s in live if s > middle][:5]
    assert ledger.latest_event().seq == live[-1]

    # a window from now on: compaction prunes the oldest events
    ledger.set_configs([(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=3), 41)])
    _epoch(ledger, 41)
    _epoch(ledger, 42)
    assert ledger.compact().through == 39
    _epoch(ledger, 43)  # its events are numbered after the counter's steps taken by the deletions
    kept = _live_sequences(zk, ledger)
    assert len(kept) < len(live) // 4 and kept[0] > live[-1] - len(kept)
    assert [e.seq for e in ledger.history()] == kept
    assert ledger.latest_event().seq == kept[-1]
    # events deleted out of order (by hand): the newest, and one in the middle, leave numbers with
    # no event; the reads probe past them and still find exactly what is there
    zk.delete(ledger.paths.event(kept[-1]))
    zk.delete(ledger.paths.event(kept[3]))
    kept = _live_sequences(zk, ledger)
    assert ledger.latest_event().seq == kept[-1]
    assert [e.seq for e in ledger.history()] == kept
    assert [e.seq for e in ledger.history(since_seq=kept[1])] == kept[2:]
    zk.delete(ledger.paths.event(kept[5]))  # in the middle only: both ends of the counted range exist
    kept = _live_sequences(zk, ledger)
    assert [e.seq for e in ledger.history()] == kept
    assert ledger.latest_event().seq == kept[-1]

    assert ledger.paths.history not in spy.paths(), "the history node was listed"
    # every listing the ledger asked for is small: seals, vote counters, epochs of a short window
    assert spy.largest() <= listing_bytes([epoch_key(e) for e in range(1, 44)]), spy.answers


def test_an_old_pipeline_reads_the_same_history_without_a_listing(spied, zk):
    """A pipeline written before this change has the same layout: nothing to migrate."""
    old = EpochLedger(zk, "before", owner="o")
    old.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}))
    for epoch in range(1, 6):
        _epoch(old, epoch)
    expected = [(e.seq, e.event) for e in old.history()]
    assert [s for s, _ in expected] == _live_sequences(zk, old)
    client, spy = spied
    again = EpochLedger(client, "before", owner="o")
    assert [(e.seq, e.event) for e in again.history()] == expected
    _epoch(again, 6)
    assert again.latest_event().event == "epoch_sealed"
    assert again.paths.history not in spy.paths()


def test_barrier_participants_and_barriers_per_epoch_are_bounded(spied, zk, monkeypatch):
    client, spy = spied
    monkeypatch.setattr(barriers, "MAX_PARTICIPANTS", 5)
    monkeypatch.setattr(barriers, "MAX_BARRIERS", 3)
    ledger = EpochLedger(client, "gates", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}))
    ledger.open_epoch(1)
    gate = ledger.barrier(1, "gate")
    with pytest.raises(InvalidInput, match="barrier 'gate': 6 participants; at most 5"):
        gate.declare(StragglerPolicy.fail(60), [f"w{i}" for i in range(6)])
    gate.declare(StragglerPolicy.fail(60), [f"w{i}" for i in range(3)])
    gate.register("w3")
    gate.register("w4")
    before = tree(zk, ledger.paths.base)
    with pytest.raises(BarrierFull, match="has 5 participants; at most 5: 'w5' was not registered"):
        gate.register("w5")
    gate.register("w4")  # registered already: idempotent, not refused
    for name in ("second", "third"):
        ledger.barrier(1, name).declare(StragglerPolicy.fail(60), ["w0"])
    with pytest.raises(BarrierFull, match="epoch 1 has 3 barriers; at most 3: barrier 'fourth' was not declared"):
        ledger.barrier(1, "fourth").declare(StragglerPolicy.fail(60), ["w0"])
    after = tree(zk, ledger.paths.base)
    added = set(after) - set(before)
    assert all("/second" in p or "/third" in p or "/history/" in p for p in added), added
    for i in range(5):
        gate.arrive(f"w{i}")
    assert gate.wait(timeout=10).decision == "all"
    assert spy.largest() <= listing_bytes([f"w{i}" for i in range(5)] + ["release", "p", "a"])


def test_consumers_are_bounded_and_a_full_pipeline_refuses_the_next(spied, zk, monkeypatch):
    client, spy = spied
    monkeypatch.setattr(backpressure, "MAX_CONSUMERS", 4)
    ledger = EpochLedger(client, "fans", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}, window=2))
    for i in range(4):
        ledger.consumer(f"c{i}").register()
    before = tree(zk, ledger.paths.base)
    with pytest.raises(TooManyConsumers, match="has 4 consumers registered; at most 4: 'c4' was not registered"):
        ledger.consumer("c4").register()
    assert tree(zk, ledger.paths.base) == before  # nothing was written
    ledger.consumer("c3").register()  # registered already: answered, not refused
    ledger.consumer("c0").unregister()
    ledger.consumer("c4").register()
    ledger.open_epoch(1)
    assert spy.largest() <= listing_bytes([f"c{i}" for i in range(5)])


def test_configuration_limits_refuse_naming_the_value_before_any_write(zk, monkeypatch):
    with pytest.raises(InvalidConfig, match=r"retain_epochs 10001 is more than 10000"):
        PipelineConfig({"events": ("ingest",)}, retain_epochs=config.MAX_RETAIN_EPOCHS + 1)
    with pytest.raises(InvalidConfig, match=r"257 partitions; at most 256"):
        PipelineConfig({f"p{i}": ("x",) for i in range(257)})
    monkeypatch.setattr(config_store, "MAX_CONFIG_VERSIONS", 3)
    ledger = EpochLedger(zk, "versions", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}))
    ledger.set_configs([(PipelineConfig({"events": ("ingest",)}, window=2), 5)])
    before = tree(zk, ledger.paths.base)
    with pytest.raises(ConfigConflict, match=r"has 2 configuration versions; 2 more would pass the limit of 3"):
        ledger.set_configs([(PipelineConfig({"events": ("ingest",)}, window=3), 6),
                            (PipelineConfig({"events": ("ingest",)}, window=4), 7)])
    assert tree(zk, ledger.paths.base) == before
    ledger.set_configs([(PipelineConfig({"events": ("ingest",)}, window=3), 6)])
    assert len(ledger.config_versions()) == 3


def test_pipeline_level_request_ids_are_bounded_and_forgotten_by_retention(spied, zk, monkeypatch):
    client, spy = spied
    monkeypatch.setattr(pipeline_module, "MAX_REMEMBERED_REQUESTS", 3)
    ledger = EpochLedger(client, "asks", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}, retain_epochs=1))

    def seal(epoch: int) -> None:
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "events", "ingest", {"e": epoch})

    seal(1)
    ledger.consumer("c0").register(request_id="r-1")
    ledger.consumer("c0").unregister(request_id="r-2")
    ledger.set_configs([(PipelineConfig({"events": ("ingest",)}, retain_epochs=1, window=5), 2)], request_id="r-3")
    seal(2)
    before = tree(zk, ledger.paths.base)
    with pytest.raises(TooManyRequests, match="remembers 3 pipeline-level request ids, at most 3; the rollback"):
        ledger.rollback(1, reason="too many", request_id="r-4")
    assert tree(zk, ledger.paths.base) == before  # nothing was written
    # a repeat of a remembered request is still answered from its record, not refused
    assert ledger.consumer("c0").unregister(request_id="r-2") is True
    seal(3)
    ledger.compact()
    for epoch in range(4, 6):
        seal(epoch)
    ledger.compact()  # request ids are forgotten one compaction behind the epochs (retention.py)
    assert len(zk.get_children(ledger.paths.requests)) < 3
    assert ledger.rollback(4, reason="room again", request_id="r-4") == [5]
    assert spy.largest() <= listing_bytes([f"r-{i}" for i in range(1, 5)] + [epoch_key(e) for e in range(1, 6)])


def test_staged_votes_are_pruned_without_listing_the_staged_epochs(spied, zk):
    client, spy = spied
    declared = DeclaredProducers({"sales": (TaskProducer("prod_eu", "load", name="eu"),)},
                                 ExplicitKeys({f"k{e}": e for e in range(1, 17)}))
    ledger = EpochLedger(client, "staged", owner="declared-producers")
    ledger.create_pipeline(declared.pipeline_config(retain_epochs=2))
    for epoch in range(1, 13):
        outcome = stage_vote(ledger, Match("sales", "eu", f"k{epoch}"), TaskInstanceId("prod_eu", f"r{epoch}", "load"))
        assert outcome.status == "staged"
        drain(ledger)
    assert ledger.frontier() == 12
    root = f"{ledger.paths.base}/declared"
    assert sorted(int(n) for n in zk.get_children(root)) == [10, 11, 12]  # retain_epochs behind the frontier
    assert root not in spy.paths(), "the staged epochs were listed"
    assert staged_votes(ledger, 12)[0][:2] == ("sales", "eu")
    # a repeat of a staged vote adds nothing
    again = stage_vote(ledger, Match("sales", "eu", "k12"), TaskInstanceId("prod_eu", "r12", "load"))
    assert again.status == "repeat"
    # a folder as an earlier version left it: no cursor in its data, the oldest staged epochs pruned
    # already and a later one left behind; pruning starts from the first epoch, past the gone ones
    zk.set(root, b"")
    zk.create(f"{root}/{epoch_key(5)}/sales/eu", b"{}", makepath=True)
    for epoch in range(13, 17):
        stage_vote(ledger, Match("sales", "eu", f"k{epoch}"), TaskInstanceId("prod_eu", f"r{epoch}", "load"))
        drain(ledger)
    assert ledger.frontier() == 16
    assert sorted(int(n) for n in zk.get_children(root)) == [14, 15, 16]
    assert root not in spy.paths()


def test_attempts_of_one_epoch_are_bounded_and_the_next_is_refused_before_any_write(spied, zk, monkeypatch):
    client, spy = spied
    monkeypatch.setattr(names, "MAX_ATTEMPTS", 4)
    ledger = EpochLedger(client, "retries", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}))
    tokens = [ledger.open_epoch(1).token]
    for _ in range(3):  # the same owner starting over: each time a new attempt supersedes the last
        tokens.append(ledger.open_epoch(1).token)
    assert tokens == [1, 2, 3, 4]
    before = tree(zk, ledger.paths.base)
    with pytest.raises(TooManyAttempts, match="epoch 1 has had 4 attempts, at most 4; no new attempt was started"):
        ledger.open_epoch(1)
    assert tree(zk, ledger.paths.base) == before
    attempt = ledger.current_attempt(1)
    assert attempt.token == 4 and ledger.vote(attempt, "events", "ingest", {"e": 1}).epoch_sealed
    # a rollback's reopening is an attempt too
    ledger.open_epoch(2)
    assert ledger.rollback(0, reason="again") == [1, 2]
    with pytest.raises(TooManyAttempts, match="epoch 1 has had 4 attempts"):
        ledger.open_epoch(1)
    assert spy.largest() <= listing_bytes(["sealed", "g-1", "b-1"] + [f"a-{t:010d}" for t in range(1, 5)])
