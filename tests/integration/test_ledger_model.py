"""Stateful property test: random opens, takeovers, votes, aborts, closes, rollbacks, configuration
changes and barrier arrivals from three clients against a real ZooKeeper, compared step by step with a
plain in-memory model of the promises.

The second run sends every client through a proxy that, when a rule says so, drops the answer of the
next committed write: every answer must still match the model (a refusal wrote nothing, a success is
visible), and repeating an earlier request with its request id must change nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from zk_proxy import LostAnswerProxy

from airflow_epochs.coordination import (
    AttemptSuperseded,
    BarrierNotDeclared,
    ConfigConflict,
    DuplicateVote,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochIncomplete,
    EpochLedger,
    EpochNotOpen,
    EpochOutOfOrder,
    EpochsError,
    PartitionAlreadySealed,
    PipelineConfig,
    RollbackRefused,
    StragglerPolicy,
    UnknownParticipant,
    UnknownPartition,
    UnknownProducer,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIGS = [{"a": ("x", "y"), "b": ("z",)}, {"a": ("x",), "c": ("y", "z")}]
PARTITIONS = CONFIGS[0]
OWNERS = ("o0", "o1", "o2")
_CLIENTS: list = []
_PROXY: list[LostAnswerProxy] = []  # set for the lost-answer run


@dataclass
class ModelEpoch:
    state: str
    attempt: int
    attempt_state: str
    owner: str
    generation: int
    partitions: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(PARTITIONS))
    votes: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    sealed: dict[str, int] = field(default_factory=dict)
    barriers: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.votes = {p: {} for p in self.partitions}


class Model:
    """The promises, written as directly as possible."""

    def __init__(self) -> None:
        self.frontier = 0
        self.newest = 0
        self.epochs: dict[int, ModelEpoch] = {}
        # the configuration each opening (epoch, generation) runs under: a vote is checked against
        # its own attempt's configuration, read-free, before the fence says whether it is current
        self.opened_under: dict[tuple[int, int], dict[str, tuple[str, ...]]] = {}
        self.configs: list[tuple[int, int]] = [(1, 0)]  # (from_epoch, index into CONFIGS), in version order

    def config_at(self, epoch: int) -> dict[str, tuple[str, ...]]:
        best = max((f, v) for v, (f, _) in enumerate(self.configs) if f <= epoch)
        return CONFIGS[self.configs[best[1]][1]]

    def set_config(self, from_epoch: int, which: int):
        if from_epoch <= self.newest:
            return ConfigConflict
        self.configs.append((from_epoch, which))
        return ("set",)

    def declare(self, epoch: int, name: str, participants: tuple[str, ...]):
        node = self.epochs.get(epoch)
        if node is None or node.state == "rolled_back":
            return EpochNotOpen
        if node.state != "open":
            return EpochNotOpen
        node.barriers.setdefault(name, {"registered": set(participants), "arrived": set()})
        return ("declared",)

    def arrive(self, epoch: int, name: str, participant: str):
        node = self.epochs.get(epoch)
        if node is None or node.state == "rolled_back":
            return EpochNotOpen
        barrier = node.barriers.get(name)
        if barrier is None:
            return BarrierNotDeclared
        if participant not in barrier["registered"]:
            return UnknownParticipant
        barrier["arrived"].add(participant)
        return ("arrived",)

    def open(self, owner: str, epoch: int, takeover: bool):
        node = self.epochs.get(epoch)
        if node is not None:
            if node.state == "sealed":
                return EpochAlreadySealed
            if node.state == "open":
                # every call is a new request: the same owner supersedes its own running attempt
                # (a replacement never shares a zombie's token); another owner needs takeover
                if node.attempt_state == "running" and node.owner != owner and not takeover:
                    return EpochAlreadyOpen
                node.attempt += 1
                node.attempt_state = "running"
                node.owner = owner
                node.votes = {p: dict(v) for p, v in node.votes.items()}
                return (epoch, node.attempt, node.generation)
        if epoch != self.frontier + 1:
            return EpochOutOfOrder
        generation = node.generation + 1 if node else 1
        token = node.attempt + 1 if node else 1
        self.epochs[epoch] = ModelEpoch("open", token, "running", owner, generation, dict(self.config_at(epoch)))
        self.opened_under[(epoch, generation)] = dict(self.config_at(epoch))
        self.newest = epoch
        return (epoch, token, generation)

    def _current_error(self, node: ModelEpoch, token: int, generation: int):
        if node.state == "sealed":
            return EpochAlreadySealed
        if node.attempt != token or node.generation != generation or node.state != "open" \
                or node.attempt_state != "running":
            return AttemptSuperseded
        return None

    def vote(self, epoch: int, token: int, generation: int, partition: str, producer: str, manifest: int):
        node = self.epochs[epoch]
        partitions = self.opened_under[(epoch, generation)]
        if partition not in partitions:
            return UnknownPartition
        if producer not in partitions[partition]:
            return UnknownProducer
        if node.state == "sealed" and node.attempt == token and node.generation == generation:
            return self._repeat(node, token, partition, producer, manifest)
        error = self._current_error(node, token, generation)
        if error:
            return error
        if partition in node.sealed or node.votes[partition].get(producer, (None,))[0] == token:
            return self._repeat(node, token, partition, producer, manifest)
        node.votes[partition][producer] = (token, manifest)
        complete = all(node.votes[partition].get(p, (None,))[0] == token for p in node.partitions[partition])
        epoch_sealed = False
        if complete:
            node.sealed[partition] = token
            if set(node.sealed) == set(node.partitions):
                node.state = "sealed"
                node.attempt_state = "sealed"
                self.frontier = epoch
                epoch_sealed = True
        return ("voted", complete, epoch_sealed)

    def _repeat(self, node: ModelEpoch, token: int, partition: str, producer: str, manifest: int):
        vote = node.votes[partition].get(producer)
        if vote is not None and vote[0] == token:
            return ("duplicate",) if vote[1] == manifest else DuplicateVote
        if partition in node.sealed:
            return PartitionAlreadySealed
        raise AssertionError("model reached an impossible state")

    def abort(self, epoch: int, token: int, generation: int):
        node = self.epochs[epoch]
        error = self._current_error(node, token, generation)
        if error:
            return error
        node.attempt_state = "aborted"
        return ("aborted",)

    def close(self, epoch: int, token: int, generation: int):
        node = self.epochs[epoch]
        if node.state == "sealed":
            return ("closed",) if (node.attempt, node.generation) == (token, generation) else EpochAlreadySealed
        error = self._current_error(node, token, generation)
        return error or EpochIncomplete

    def rollback(self, to: int):
        if to > self.frontier:
            return RollbackRefused
        if to >= self.newest:
            return RollbackRefused
        for epoch in range(to + 1, self.newest + 1):
            self.epochs[epoch].state = "rolled_back"
            self.epochs[epoch].attempt_state = "rolled_back"
        self.frontier = to
        self.newest = to
        return ("rolled back",)


def outcome(call):
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc)


class LedgerMachine(RuleBasedStateMachine):
    attempts = Bundle("attempts")

    def __init__(self) -> None:
        super().__init__()
        name = "m" + uuid.uuid4().hex[:12]
        self.ledgers = [EpochLedger(client, name, owner=owner) for client, owner in zip(_CLIENTS, OWNERS, strict=True)]
        self.ledgers[0].create_pipeline(PipelineConfig(PARTITIONS))
        self.model = Model()
        # repeats of successful requests, with their request ids: each must change nothing
        self.repeats: list[Callable[[], Any]] = []

    def remember(self, call: Callable[[str], Any]) -> Any:
        """Run ``call`` under a fresh request id; if it succeeds, keep a repeat of it."""
        rid = uuid.uuid4().hex
        result = outcome(lambda: call(rid))
        if not isinstance(result, type):
            self.repeats.append(lambda: call(rid))
        return result

    @rule(target=attempts, who=st.integers(0, 2), delta=st.integers(-1, 2), takeover=st.booleans())
    def open_epoch(self, who, delta, takeover):
        epoch = max(1, self.model.frontier + delta)
        expected = self.model.open(OWNERS[who], epoch, takeover)
        got = self.remember(lambda rid: self.ledgers[who].open_epoch(epoch, takeover=takeover, request_id=rid))
        if isinstance(expected, tuple):
            assert not isinstance(got, type), f"open {epoch} by {OWNERS[who]}: expected {expected}, got {got}"
            assert (got.epoch, got.token, got.generation) == expected
            return got
        assert got is expected, f"open {epoch} by {OWNERS[who]}: expected {expected.__name__}, got {got}"
        return None

    @rule(attempt=attempts, who=st.integers(0, 2), partition=st.sampled_from(["a", "b", "c"]),
          producer=st.sampled_from(["x", "y", "z"]), manifest=st.integers(0, 1))
    def vote_any(self, attempt, who, partition, producer, manifest):
        self.vote(attempt, who, partition, producer, manifest)

    def vote(self, attempt, who, partition, producer, manifest):
        if attempt is None:
            return
        expected = self.model.vote(attempt.epoch, attempt.token, attempt.generation, partition, producer, manifest)
        got = self.remember(lambda rid: self.ledgers[who].vote(attempt, partition, producer, {"m": manifest},
                                                               request_id=rid))
        if isinstance(expected, tuple):
            assert not isinstance(got, type), f"vote {attempt} {partition}/{producer}: expected {expected}, got {got}"
            if expected[0] == "duplicate":
                assert got.duplicate
            else:
                assert (got.partition_sealed, got.epoch_sealed) == expected[1:]
        else:
            assert got is expected, f"vote {attempt} {partition}/{producer}: expected {expected.__name__}, got {got}"

    @rule(attempt=attempts, who=st.integers(0, 2), pick=st.integers(0, 5))
    def vote_missing(self, attempt, who, pick):
        """A vote the model says is still missing: drives epochs to their seals (and beyond)."""
        if attempt is None:
            return
        node = self.model.epochs[attempt.epoch]
        missing = [(p, q) for p, producers in sorted(node.partitions.items()) for q in producers
                   if node.votes[p].get(q, (None,))[0] != attempt.token and p not in node.sealed]
        if not missing:
            return
        partition, producer = missing[pick % len(missing)]
        self.vote(attempt, who, partition, producer, 0)

    @rule(attempt=attempts, who=st.integers(0, 2))
    def abort(self, attempt, who):
        if attempt is None:
            return
        expected = self.model.abort(attempt.epoch, attempt.token, attempt.generation)
        got = self.remember(lambda rid: self.ledgers[who].abort_attempt(attempt, reason="test", request_id=rid))
        if isinstance(expected, tuple):
            assert not isinstance(got, type) and got.overtaken is None, (expected, got)
        else:
            assert got is expected, (expected, got)

    @rule(attempt=attempts, who=st.integers(0, 2))
    def close(self, attempt, who):
        if attempt is None:
            return
        expected = self.model.close(attempt.epoch, attempt.token, attempt.generation)
        got = outcome(lambda: self.ledgers[who].close_epoch(attempt))
        if isinstance(expected, tuple):
            assert not isinstance(got, type) and got.state == "sealed", (expected, got)
        else:
            assert got is expected, (expected, got)

    @rule(back=st.integers(0, 3), who=st.integers(0, 2))
    def rollback(self, back, who):
        to = max(0, self.model.frontier - back)
        expected = self.model.rollback(to)
        got = self.remember(lambda rid: self.ledgers[who].rollback(to, reason="model test", request_id=rid))
        if isinstance(expected, tuple):
            assert got == list(range(to + 1, to + 1 + len(got))) and not isinstance(got, type), (expected, got)
        else:
            assert got is expected, (expected, got)

    @rule(delta=st.integers(-1, 3), which=st.integers(0, 1), who=st.integers(0, 2))
    def set_config(self, delta, which, who):
        from_epoch = max(1, self.model.newest + delta)
        expected = self.model.set_config(from_epoch, which)
        got = self.remember(lambda rid: self.ledgers[who].set_config(PipelineConfig(CONFIGS[which]),
                                                                     from_epoch=from_epoch, request_id=rid))
        if isinstance(expected, tuple):
            assert not isinstance(got, type), (expected, got)
        else:
            assert got is expected, (expected, got)

    @rule(delta=st.integers(-1, 0), who=st.integers(0, 2), name=st.sampled_from(["b1", "b2"]))
    def declare_barrier(self, delta, who, name):
        epoch = max(1, self.model.newest + delta)
        if epoch not in self.model.epochs:
            return
        expected = self.model.declare(epoch, name, ("x", "y"))
        got = outcome(lambda: self.ledgers[who].barrier(epoch, name).declare(
            StragglerPolicy.fail(3600), ["x", "y"]))
        assert (got is None) if isinstance(expected, tuple) else (got is expected), (expected, got)

    @rule(delta=st.integers(-1, 0), who=st.integers(0, 2), name=st.sampled_from(["b1", "b2"]),
          participant=st.sampled_from(["x", "y", "q"]))
    def arrive(self, delta, who, name, participant):
        epoch = max(1, self.model.newest + delta)
        if epoch not in self.model.epochs:
            return
        expected = self.model.arrive(epoch, name, participant)
        got = outcome(lambda: EpochLedger(self.ledgers[who].client, self.ledgers[who].pipeline).barrier(epoch, name)
                      .arrive(participant))
        if isinstance(expected, tuple):
            assert not isinstance(got, type), (expected, got)
        else:
            assert got is expected, (expected, got)

    @rule(pick=st.integers(0, 1000))
    def repeat_a_request(self, pick):
        """Repeat an earlier successful request with its id: whatever it answers (its first result, or
        a refusal if things moved on), the state must not change (the model is not told anything)."""
        if not self.repeats:
            return
        got = outcome(self.repeats[pick % len(self.repeats)])
        assert not isinstance(got, type) or issubclass(got, EpochsError), got

    @rule(count=st.integers(1, 2))
    def lose_the_next_answer(self, count):
        if _PROXY:
            _PROXY[0].drop_next_committed_write(count)

    @invariant()
    def state_matches(self):
        ledger = self.ledgers[0]
        assert ledger.frontier() == self.model.frontier
        assert ledger.newest_epoch() == self.model.newest
        for epoch, node in self.model.epochs.items():
            info = ledger.epoch_info(epoch)
            assert (info.state, info.attempt, info.attempt_state, info.owner, info.generation) == (
                node.state, node.attempt, node.attempt_state, node.owner, node.generation)
            if node.state != "rolled_back":
                assert set(info.sealed_partitions) == set(node.sealed)
                assert set(info.partitions) == set(node.partitions)
                for name, barrier in node.barriers.items():
                    released = EpochLedger(ledger.client, ledger.pipeline).barrier(epoch, name).outcome()
                    should = barrier["arrived"] >= barrier["registered"]
                    assert (released is not None) == should, (epoch, name, barrier, released)


def test_ledger_matches_model(zk_factory):
    _CLIENTS[:] = [zk_factory() for _ in OWNERS]
    _PROXY.clear()
    run_state_machine_as_test(LedgerMachine, settings=settings(
        max_examples=40, stateful_step_count=30, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_ledger_matches_model_when_answers_are_lost(zk_server, zk_chroot, zk):
    proxy = LostAnswerProxy(zk_server)
    clients = [proxy.client(zk_chroot, start=False, timeout=10) for _ in OWNERS]
    for client in clients:
        client.start(timeout=15)
    # the invariant reads through a direct client: what is really in ZooKeeper
    _CLIENTS[:] = [zk, *clients[1:]]
    _PROXY[:] = [proxy]
    try:
        run_state_machine_as_test(LedgerMachine, settings=settings(
            max_examples=25, stateful_step_count=30, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
        assert proxy.dropped, "no answer was lost: the run tested nothing"
    finally:
        _PROXY.clear()
        proxy.close()
        for client in clients:
            client.stop()
            client.close()


def test_history_replays_the_frontier(zk):
    """The recorded history alone is enough to recompute the frontier (the CLI relies on it)."""
    ledger = EpochLedger(zk, "replay", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    for epoch in (1, 2, 3):
        ledger.vote(ledger.open_epoch(epoch), "a", "x", {"e": epoch})
    ledger.rollback(1, reason="reprocess")
    ledger.vote(ledger.open_epoch(2), "a", "x", {"e": 2, "again": True})
    frontier = 0
    for event in ledger.history():
        if event.event == "epoch_sealed":
            assert event.record.epoch == frontier + 1
            frontier = event.record.epoch
        elif event.event == "rollback":
            frontier = event.detail["to_epoch"]
    assert frontier == ledger.frontier() == 2
