"""Lost answers: every call family is run through a proxy that drops the answer to its committed
write (the client sees ConnectionLoss after the server applied the request), and the answer the
library gives is checked against the state found in ZooKeeper: an acknowledged call is visible, a
refusal wrote nothing, nothing is applied twice, and repeating the request id changes nothing.

``test_without_request_ids_the_answers_would_lie`` shows that these tests have teeth: with request
ids stripped (each round of a call writes under a fresh id and nothing looks for the first one),
the same faults make the library report refusals for writes that happened and apply requests twice.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from kazoo.client import KazooClient
from zk_proxy import MULTI, LostAnswerProxy

from airflow_epochs.coordination import (
    AttemptSuperseded,
    EpochLedger,
    OutcomeUnknown,
    PipelineConfig,
    RollbackRefused,
    StragglerPolicy,
    register_consumer,
    unregister_consumer,
)
from airflow_epochs.coordination.base import session as session_module

pytestmark = [pytest.mark.integration]

CONFIG = PipelineConfig({"a": ("x", "y"), "b": ("z",)})




def lose_next(proxy: LostAnswerProxy, count: int = 1) -> int:
    proxy.drop_next_committed_write(count)
    return len(proxy.dropped)


def attempts_of(zk: KazooClient, ledger: EpochLedger, epoch: int) -> list[str]:
    return sorted(n for n in zk.get_children(ledger.paths.epoch(epoch)) if n.startswith("a-"))


def events(ledger: EpochLedger, name: str) -> list[dict]:
    return [dict(e.detail) for e in ledger.history() if e.event == name]


def test_create_pipeline_and_reconfigure(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="o")
    before = lose_next(proxy)
    version = ledger.create_pipeline(CONFIG)
    assert len(proxy.dropped) == before + 1 and version.version == 0
    assert EpochLedger(zk, "p").config_for(1).config == CONFIG

    before = lose_next(proxy)
    changed = ledger.set_config(PipelineConfig({"a": ("x",)}), from_epoch=3, request_id="cfg-3")
    assert len(proxy.dropped) == before + 1 and changed.version == 1
    again = ledger.set_config(PipelineConfig({"a": ("x",)}), from_epoch=3, request_id="cfg-3")
    assert again == changed  # the repeat found the first one: still two versions
    assert [v.version for v in EpochLedger(zk, "p").config_versions()] == [0, 1]
    assert len(events(EpochLedger(zk, "p"), "config_set")) == 1


def test_open_new_epoch_takeover_and_reopen(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="a")
    ledger.create_pipeline(CONFIG)
    before = lose_next(proxy)
    first = ledger.open_epoch(1, request_id="open-a")
    assert len(proxy.dropped) == before + 1
    assert first.token == 1 and attempts_of(zk, ledger, 1) == ["a-0000000001"]
    assert ledger.open_epoch(1, request_id="open-a") == first  # a repeat resumes, writes nothing

    other = EpochLedger(lossy, "p", owner="b")
    before = lose_next(proxy)
    took = other.open_epoch(1, takeover=True, request_id="take-b")
    assert len(proxy.dropped) == before + 1
    assert took.token == 2 and attempts_of(zk, ledger, 1) == ["a-0000000001", "a-0000000002"]
    assert other.open_epoch(1, takeover=True, request_id="take-b") == took  # not applied twice
    assert attempts_of(zk, ledger, 1) == ["a-0000000001", "a-0000000002"]
    with pytest.raises(AttemptSuperseded):
        ledger.vote(first, "b", "z")

    for partition, producer in (("a", "x"), ("a", "y"), ("b", "z")):
        other.vote(took, partition, producer)
    ledger.rollback(0, reason="redo")
    before = lose_next(proxy)
    reopened = ledger.open_epoch(1, request_id="reopen")
    assert len(proxy.dropped) == before + 1
    assert (reopened.generation, reopened.token) == (2, 3)
    assert EpochLedger(zk, "p").epoch_info(1).attempt == 3


def test_votes_and_the_seals_they_complete(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="o")
    ledger.create_pipeline(CONFIG)
    attempt = ledger.open_epoch(1)

    before = lose_next(proxy)
    plain = ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="vote-x")
    assert len(proxy.dropped) == before + 1
    assert not plain.duplicate and not plain.partition_sealed  # the vote committed: reported as cast
    assert ledger.vote(attempt, "a", "x", {"rows": 1}, request_id="vote-x") == plain

    before = lose_next(proxy)  # the vote that completes "a" (its seal is a second transaction)
    completing = ledger.vote(attempt, "a", "y", {"rows": 2}, snapshot="s3://totals/1")
    assert len(proxy.dropped) == before + 1
    assert completing.partition_sealed and not completing.epoch_sealed and not completing.duplicate

    before = lose_next(proxy, 2)  # the last partition: the vote, then the seal of partition and epoch
    last = ledger.vote(attempt, "b", "z", {"rows": 3})
    assert len(proxy.dropped) >= before + 1
    assert last.partition_sealed and last.epoch_sealed
    direct = EpochLedger(zk, "p")
    assert direct.frontier() == 1
    assert [e["partition"] for e in events(direct, "partition_sealed")] == ["a", "b"]
    assert len(events(direct, "epoch_sealed")) == 1
    assert direct.last_sealed_snapshot("a").pointer == "s3://totals/1"


def test_the_epoch_seal_after_the_last_partition(zk, lossy, proxy):
    """Two partitions of one producer each: the epoch seal is the completing sealer's own transaction."""
    ledger = EpochLedger(lossy, "q", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "a", "x")
    proxy.drop_next_committed_write(1, ops={MULTI})
    first = len(proxy.dropped)
    # the vote of "b" commits (answer dropped), then the epoch seal
    result = ledger.vote(attempt, "b", "y")
    assert len(proxy.dropped) == first + 1
    assert result.partition_sealed and result.epoch_sealed
    assert EpochLedger(zk, "q").frontier() == 1
    assert len(events(EpochLedger(zk, "q"), "epoch_sealed")) == 1


def test_abort(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="o")
    ledger.create_pipeline(CONFIG)
    attempt = ledger.open_epoch(1)
    before = lose_next(proxy)
    aborted = ledger.abort_attempt(attempt, reason="driver died", request_id="abort-1")
    assert (aborted.attempt, aborted.request, aborted.overtaken) == (attempt.token, "abort-1", None)
    assert len(proxy.dropped) == before + 1
    assert EpochLedger(zk, "p").epoch_info(1).attempt_state == "aborted"
    ledger.abort_attempt(attempt, reason="driver died", request_id="abort-1")  # repeat: same answer
    with pytest.raises(AttemptSuperseded):  # another request to abort it: refused, truly
        ledger.abort_attempt(attempt, reason="again")
    assert len(events(EpochLedger(zk, "p"), "attempt_aborted")) == 1


def test_close_epoch_of_a_pipeline_without_partitions(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "orchestration", owner="o")
    ledger.create_pipeline(PipelineConfig({}))
    attempt = ledger.open_epoch(1)
    before = lose_next(proxy)
    info = ledger.close_epoch(attempt)
    assert len(proxy.dropped) == before + 1 and info.state == "sealed"
    assert ledger.close_epoch(attempt).state == "sealed"
    assert len(events(EpochLedger(zk, "orchestration"), "epoch_sealed")) == 1


def test_rollback_is_applied_once(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    for epoch in (1, 2, 3):
        ledger.vote(ledger.open_epoch(epoch), "a", "x")
    before = lose_next(proxy)
    undone = ledger.rollback(1, reason="bad input", request_id="rb-1")
    assert len(proxy.dropped) == before + 1 and undone == [2, 3]
    # another coordinator reseals epoch 2 after the rollback ...
    other = EpochLedger(zk, "p", owner="other")
    other.vote(other.open_epoch(2), "a", "x")
    # ... and a repeat of the rollback request neither undoes that seal nor reports a refusal
    assert ledger.rollback(1, reason="bad input", request_id="rb-1") == [2, 3]
    assert other.frontier() == 2 and len(events(other, "rollback")) == 1
    with pytest.raises(RollbackRefused):  # a new request for the same rollback: truly refused
        ledger.rollback(2, reason="nothing after it")


def test_lease_consumers_and_barriers(zk, lossy, proxy):
    ledger = EpochLedger(lossy, "p", owner="o")
    ledger.create_pipeline(CONFIG)
    lease = EpochLedger(lossy, "p", owner="o").lease(duration=datetime.timedelta(seconds=30))
    before = lose_next(proxy)
    holder = lease.acquire()
    assert len(proxy.dropped) == before + 1 and holder.owner == "o"
    before = lose_next(proxy)
    assert lease.release() is True
    assert len(proxy.dropped) == before + 1
    assert len(events(EpochLedger(zk, "p"), "leader_changed")) == 1

    before = lose_next(proxy)
    assert register_consumer(ledger, "report").acked == 0
    assert len(proxy.dropped) == before + 1
    before = lose_next(proxy)
    assert unregister_consumer(ledger, "report") is True  # not "was not registered"
    assert len(proxy.dropped) == before + 1
    assert zk.exists(ledger.paths.consumer("report")) is None

    ledger.open_epoch(1)
    barrier = EpochLedger(lossy, "p").barrier(1, "ingested")
    barrier.declare(StragglerPolicy.fail(60), ["x", "y"])
    before = lose_next(proxy)
    assert barrier.arrive("x").index == 1
    assert len(proxy.dropped) == before + 1
    before = lose_next(proxy, 2)  # the completing arrival, then its release
    last = barrier.arrive("y")
    assert len(proxy.dropped) >= before + 1
    assert last.released and EpochLedger(zk, "p").barrier(1, "ingested").outcome().decision == "all"


def test_outcome_unknown_names_the_request_and_a_repeat_resolves_it(zk, zk_chroot, proxy):
    client = proxy.client(zk_chroot, timeout=4)
    try:
        ledger = EpochLedger(client, "p", owner="o", op_timeout=3)
        ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
        for epoch in (1, 2):
            ledger.vote(ledger.open_epoch(epoch), "a", "x")
        proxy.block(30)  # once the answer is lost, ZooKeeper stays out of reach for the whole deadline
        lose_next(proxy)
        with pytest.raises(OutcomeUnknown) as unknown:
            ledger.rollback(1, reason="late data")
        assert "request_id=" in str(unknown.value)
        proxy.unblock()
        assert EpochLedger(zk, "p").frontier() == 1  # it did commit
        patient = EpochLedger(client, "p", owner="o", op_timeout=20)
        assert patient.rollback(1, reason="late data", request_id=unknown.value.request_id) == [2]
        assert len(events(patient, "rollback")) == 1
    finally:
        proxy.unblock()
        client.stop()
        client.close()


def _without_request_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every round of every call write under a fresh request id and never look for an earlier
    one: what the library did before request ids."""
    real = session_module.Session.call

    def forgetful(self, body, *, what, timeout=None, request_id=None, find=None, started=None):
        def fresh(call):
            call.request_id = uuid.uuid4().hex
            return body(call)

        return real(self, fresh, what=what, timeout=timeout, request_id=None, find=None, started=started)

    monkeypatch.setattr(session_module.Session, "call", forgetful)


def test_without_request_ids_the_answers_would_lie(zk, lossy, proxy, monkeypatch):
    ledger = EpochLedger(lossy, "p", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    for epoch in (1, 2, 3):
        ledger.vote(ledger.open_epoch(epoch), "a", "x")
    attempt = ledger.open_epoch(4)
    _without_request_ids(monkeypatch)

    lose_next(proxy)
    with pytest.raises(AttemptSuperseded):  # a refusal ... for an abort that happened
        ledger.abort_attempt(attempt, reason="x")
    assert EpochLedger(zk, "p").epoch_info(4).attempt_state == "aborted"

    lose_next(proxy)
    reopened = ledger.open_epoch(4)  # applied twice: the retry superseded the attempt it had just opened
    assert reopened.token == attempt.token + 2

    lose_next(proxy)
    with pytest.raises(RollbackRefused):  # a refusal ... for a rollback that happened
        ledger.rollback(2, reason="x")
    assert EpochLedger(zk, "p").frontier() == 2
