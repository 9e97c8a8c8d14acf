"""Every answer true, round 2: the ten races of issue 22, each against a real ZooKeeper.

One client (A) loses the answer to a committed write; before it asks again, another owner (B) acts:
takes the epoch over, aborts, rolls back, closes, votes or compacts. A's answer must say what its
request did (a result, flagged with ``overtaken`` if what it did is no longer current) and never
"nothing was written" for a request that committed. The exhaustive grid over every call family,
drop point and interleaved call is in ``test_outcomes_grid.py``.
"""

from __future__ import annotations

import datetime
import time

import pytest
from outcome_oracle import dead_vote, doc, on_record

from airflow_epochs.coordination import (
    CallUnfinished,
    EpochAlreadySealed,
    EpochIncomplete,
    EpochLedger,
    InvalidInput,
    OutcomeUnknown,
    PartitionAlreadySealed,
    PipelineConfig,
    open_as_leader,
)
from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.protocol import aborts as aborts_module
from airflow_epochs.coordination.services import coordinator as coordinator_module

pytestmark = [pytest.mark.integration]

CONFIG = PipelineConfig({"a": ("x", "y"), "b": ("z",)})




def seal_epoch_one(ledger: EpochLedger) -> None:
    attempt = ledger.open_epoch(1)
    for partition, producer in (("a", "x"), ("a", "y"), ("b", "z")):
        ledger.vote(attempt, partition, producer)


def test_scenario_01_open_answer_lost_then_a_takeover(zk, lossy, proxy):
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(CONFIG)
    proxy.drop_next_committed_write(on_drop=lambda: b.open_epoch(1, takeover=True))
    opened = a.open_epoch(1, request_id="open-A")
    assert proxy.dropped
    assert (opened.token, opened.request) == (1, "open-A")
    assert opened.overtaken is not None and (opened.overtaken.change, opened.overtaken.current) == ("superseded", 2)
    again = a.open_epoch(1, request_id="open-A")  # the repeat: the same true answer, nothing written
    assert again == opened and again.overtaken == opened.overtaken
    assert [e.detail["owner"] for e in a.history() if e.event == "epoch_opened"] == ["A"]
    assert a.epoch_info(1).attempt == 2


def test_scenario_02_abort_answer_lost_then_a_rollback(zk, lossy, proxy):
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(CONFIG)
    seal_epoch_one(a)
    attempt = a.open_epoch(2)
    proxy.drop_next_committed_write(on_drop=lambda: b.rollback(1, reason="late data"))
    aborted = a.abort_attempt(attempt, reason="driver died", request_id="abort-A")
    assert proxy.dropped
    assert aborted.request == "abort-A" and aborted.overtaken is not None
    assert aborted.overtaken.change == "rolled_back"
    assert a.abort_attempt(attempt, reason="driver died", request_id="abort-A") == aborted
    assert [e.event for e in a.history()][-2:] == ["attempt_aborted", "rollback"]


def test_scenario_03_close_answer_lost_then_a_rollback(zk, lossy, proxy):
    a, b = EpochLedger(lossy, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(PipelineConfig({}))
    a.close_epoch(a.open_epoch(1))
    attempt = a.open_epoch(2)
    proxy.drop_next_committed_write(on_drop=lambda: b.rollback(1, reason="bad epoch 2"))
    closed = a.close_epoch(attempt, request_id="close-A")
    assert proxy.dropped
    assert closed.epoch == 2 and closed.overtaken is not None and closed.overtaken.change == "rolled_back"
    assert closed.state == "sealed" and a.frontier() == 1  # the epoch as its close sealed it, since rolled back
    assert a.close_epoch(attempt, request_id="close-A").overtaken == closed.overtaken
    sealed = [e.record.epoch for e in a.history() if e.event == "epoch_sealed"]
    assert sealed == [1, 2]  # its close did seal epoch 2 before the rollback


def test_scenario_04_a_sent_write_past_the_deadline_is_outcome_unknown(zk, zk_chroot, proxy):
    client = proxy.client(zk_chroot, timeout=4)
    try:
        a = EpochLedger(client, "p", owner="A", op_timeout=2)
        a.create_pipeline(CONFIG)
        attempt = a.open_epoch(1)
        # the vote commits, its answer is lost, and ZooKeeper stays out of reach past the deadline
        proxy.drop_next_committed_write(on_drop=lambda: proxy.block(30))
        with pytest.raises(OutcomeUnknown) as unknown:
            a.vote(attempt, "a", "x", {"rows": 1}, request_id="vote-A")
        assert unknown.value.request_id == "vote-A" and "nothing was written" not in str(unknown.value)
        proxy.unblock()
        assert doc(zk, a.paths.vote(1, 1, "a", "x"))["request"] == "vote-A"
        assert EpochLedger(client, "p", owner="A").vote(attempt, "a", "x", {"rows": 1}, request_id="vote-A").request \
            == "vote-A"  # the repeat finds it
    finally:
        proxy.unblock()
        client.stop()
        client.close()


def test_scenario_04b_a_committed_write_then_the_deadline_is_call_unfinished(zk, zk_chroot, proxy):
    """The vote's own transaction was answered; the seal step after it could not reach ZooKeeper."""
    client = proxy.client(zk_chroot, timeout=4)
    try:
        a = EpochLedger(client, "p", owner="A", op_timeout=2)
        a.create_pipeline(CONFIG)
        attempt = a.open_epoch(1)
        a.vote(attempt, "a", "x")
        real_settle = Call.settle

        def answer_then_lose_zookeeper(call, steps, pending):
            results = real_settle(call, steps, pending)
            if any(step.path.endswith("/a/y") for step in steps):  # the completing vote: answered, then gone
                proxy.block(30)
                proxy.cut()
            return results

        Call.settle = answer_then_lose_zookeeper
        try:
            with pytest.raises(CallUnfinished) as unfinished:
                a.vote(attempt, "a", "y", request_id="vote-y")
        finally:
            Call.settle = real_settle
        assert unfinished.value.request_id == "vote-y" and "nothing was written" not in str(unfinished.value)
        proxy.unblock()
        assert doc(zk, a.paths.vote(1, 1, "a", "y"))["request"] == "vote-y"
        patient = EpochLedger(client, "p", owner="A", op_timeout=20)
        finished = patient.vote(attempt, "a", "y", request_id="vote-y")  # finds the vote, writes the seal
        assert finished.partition_sealed and patient.seal(1, "a") is not None
    finally:
        proxy.unblock()
        client.stop()
        client.close()


def test_scenario_05_a_refused_close_writes_nothing(zk):
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk, "p", owner="B")
    a.create_pipeline(PipelineConfig({"p1": ("x", "y"), "p2": ("z", "w")}))
    attempt = a.open_epoch(1)
    a.vote(attempt, "p1", "x")
    dead_vote(zk, a, attempt, "p1", "y")  # the completing voter of p1 died before writing its seal
    with pytest.raises(EpochIncomplete) as incomplete:
        b.close_epoch(attempt, request_id="close-B")
    assert incomplete.value.missing == ["p2"] and "nothing was written" in str(incomplete.value)
    assert a.seal(1, "p1") is None and not on_record(zk, "close-B")
    a.vote(attempt, "p2", "z")
    a.vote(attempt, "p2", "w")
    info = b.close_epoch(attempt, request_id="close-B")  # now it finishes p1's seal and reports it
    assert info.state == "sealed" and info.sealed_partitions == ("p1", "p2")


def test_scenario_06_bad_input_is_refused_before_the_lease_is_written(zk):
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(CONFIG)
    for bad in ({"request_id": "not a valid id!"}, {"backpressure_wait": -1}):
        with pytest.raises(InvalidInput):
            open_as_leader(ledger, 1, lease_duration=datetime.timedelta(seconds=30), **bad)
    with pytest.raises(InvalidInput):
        open_as_leader(ledger, 1, lease_duration=datetime.timedelta(seconds=0))
    assert zk.exists(ledger.paths.leader) is None and ledger.epoch_info(1) is None


def test_scenario_07_a_partition_sealed_by_the_older_attempt_refuses_later_votes(zk, zk_factory, monkeypatch):
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk_factory(), "p", owner="B")
    a.create_pipeline(CONFIG)
    first = a.open_epoch(1)
    a.vote(first, "a", "x")
    real_children = Call.children
    raced: list[bool] = []

    def children_then_seal(call, path, watch=None):
        names = real_children(call, path, watch)
        if path == b.paths.seals(1, 1) and not raced:  # the takeover read the sealed partitions ...
            raced.append(True)
            assert a.vote(first, "a", "y").partition_sealed  # ... and then attempt 1 seals "a"
        return names

    monkeypatch.setattr(Call, "children", children_then_seal)
    second = b.open_epoch(1, takeover=True)
    monkeypatch.setattr(Call, "children", real_children)
    assert raced and second.token == 2
    for producer in ("x", "y"):
        with pytest.raises(PartitionAlreadySealed):
            b.vote(second, "a", producer, request_id=f"late-{producer}")
        assert not on_record(zk, f"late-{producer}")
    assert b.seal(1, "a").attempt == 1
    result = b.vote(second, "b", "z")
    assert result.partition_sealed and result.epoch_sealed


def test_scenario_08_open_as_leader_never_says_nothing_was_written_after_opening(zk, zk_chroot, proxy, monkeypatch):
    client = proxy.client(zk_chroot, timeout=4)
    try:
        ledger = EpochLedger(client, "p", owner="A", op_timeout=2)
        ledger.create_pipeline(CONFIG)
        seal_epoch_one(ledger)
        real = coordinator_module.retry_snapshots

        def unreachable_then_read(led, epoch):
            proxy.block(30)
            proxy.cut()
            return real(led, epoch)

        monkeypatch.setattr(coordinator_module, "retry_snapshots", unreachable_then_read)
        with pytest.raises(CallUnfinished) as unfinished:
            open_as_leader(ledger, 2, lease_duration=datetime.timedelta(seconds=30), request_id="lead-2")
        message = str(unfinished.value)
        assert unfinished.value.request_id == "lead-2" and "nothing was written" not in message
        assert "opened as attempt 1" in message
        monkeypatch.setattr(coordinator_module, "retry_snapshots", real)
        proxy.unblock()
        decision = open_as_leader(EpochLedger(client, "p", owner="A"), 2, lease_duration=datetime.timedelta(seconds=30),
                                  request_id="lead-2")
        assert decision.action == "opened" and decision.attempt.token == 1 and decision.attempt.overtaken is None
        assert len(zk.get_children(ledger.paths.epoch(2))) == 2  # one attempt (and its seal counter)
    finally:
        proxy.unblock()
        client.stop()
        client.close()


def test_scenario_09_outcome_unknown_names_the_callers_request(zk, zk_chroot, proxy):
    client = proxy.client(zk_chroot, timeout=4)
    try:
        ledger = EpochLedger(client, "p", owner="A", op_timeout=2)
        ledger.create_pipeline(CONFIG)
        proxy.drop_next_committed_write(on_drop=lambda: proxy.block(30))  # the lease write
        with pytest.raises(OutcomeUnknown) as unknown:
            open_as_leader(ledger, 1, lease_duration=datetime.timedelta(seconds=30), request_id="lead-1")
        assert unknown.value.request_id == "lead-1"
        proxy.unblock()
        assert doc(zk, ledger.paths.leader)["request"] == "lead-1"
        decision = open_as_leader(EpochLedger(client, "p", owner="A"), 1,
                                  lease_duration=datetime.timedelta(seconds=30), request_id=unknown.value.request_id)
        assert decision.action == "opened" and decision.attempt.request == "lead-1"
        assert doc(zk, ledger.paths.leader)["request"] == "lead-1"  # found, not taken again
        assert [e.event for e in ledger.history()].count("leader_changed") == 1
    finally:
        proxy.unblock()
        client.stop()
        client.close()


def test_scenario_10_an_abort_never_lands_after_the_attempt_sealed_the_epoch(zk, zk_factory, monkeypatch):
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk_factory(), "p", owner="B")
    a.create_pipeline(PipelineConfig({"a": ("x",)}))
    attempt = a.open_epoch(1)
    real = aborts_module.commit_or_conflict
    raced: list[bool] = []

    def seal_first(call, ops):
        if not raced:  # the abort read the epoch as open; the attempt seals it before the abort commits
            raced.append(True)
            assert b.vote(attempt, "a", "x").epoch_sealed
        return real(call, ops)

    monkeypatch.setattr(aborts_module, "commit_or_conflict", seal_first)
    with pytest.raises(EpochAlreadySealed):
        a.abort_attempt(attempt, reason="too late", request_id="abort-late")
    assert raced and not on_record(zk, "abort-late")
    assert [e.event for e in a.history()].count("attempt_aborted") == 0
    assert a.epoch_info(1).state == "sealed"


def test_a_lease_acquisition_found_after_another_owner_took_it(zk, lossy, proxy):
    a = EpochLedger(lossy, "p", owner="A").lease(duration=datetime.timedelta(seconds=30))
    later = EpochLedger(zk, "p", owner="B", clock=lambda: time.time() + 3600).lease(
        duration=datetime.timedelta(seconds=30))
    EpochLedger(zk, "p", owner="A").create_pipeline(CONFIG)
    proxy.drop_next_committed_write(on_drop=later.acquire)
    holder = a.acquire(request_id="lease-A")
    assert holder.owner == "A" and holder.overtaken is not None and holder.overtaken.current == "B"


def test_a_lease_acquisition_found_after_two_takeovers_and_renewals(zk, lossy, proxy):
    """A's answer is lost, then B and C take the lease in turn (and renew it) before A repeats: A's request
    is still found (the lease keeps its recent holdings), never refused as if nothing was written; and a
    repeat of an older renewal of a holding still in force is that holding, not a second renewal."""
    a = EpochLedger(lossy, "p", owner="A").lease(duration=datetime.timedelta(seconds=30))
    b = EpochLedger(zk, "p", owner="B", clock=lambda: time.time() + 3600).lease(duration=datetime.timedelta(seconds=30))
    c = EpochLedger(zk, "p", owner="C", clock=lambda: time.time() + 7200).lease(duration=datetime.timedelta(seconds=30))
    EpochLedger(zk, "p", owner="A").create_pipeline(CONFIG)

    def two_takeovers() -> None:
        b.acquire()
        c.acquire()
        c.acquire()

    proxy.drop_next_committed_write(on_drop=two_takeovers)
    holder = a.acquire(request_id="lease-A")
    assert holder.owner == "A" and holder.overtaken is not None and holder.overtaken.current == "C"
    first = c.acquire(request_id="renew-1")
    c.acquire(request_id="renew-2")
    version = zk.exists(c.ctx.paths.leader).version
    again = c.acquire(request_id="renew-1")
    assert zk.exists(c.ctx.paths.leader).version == version  # found, not applied twice
    assert again.owner == "C" and again.overtaken is None and again.until >= first.until


def test_a_close_cut_short_by_a_takeover_reports_the_seal_it_wrote(zk, zk_factory, monkeypatch):
    """The close seals p1 (its voter died), then B takes the epoch over before it seals p2: the close's
    answer says what its request sealed and that the attempt was superseded, never "nothing was written"."""
    a, b = EpochLedger(zk, "p", owner="A"), EpochLedger(zk_factory(), "p", owner="B")
    a.create_pipeline(PipelineConfig({"p1": ("x", "y"), "p2": ("z", "w")}))
    attempt = a.open_epoch(1)
    a.vote(attempt, "p1", "x")
    a.vote(attempt, "p2", "z")
    dead_vote(zk, a, attempt, "p1", "y")
    dead_vote(zk, a, attempt, "p2", "w")
    real_commit = Call.commit
    raced: list[bool] = []

    def takeover_after_the_first_seal(call, ops):
        results = real_commit(call, ops)
        if call.request_id == "close-A" and not raced:
            raced.append(True)
            b.open_epoch(1, takeover=True)
        return results

    monkeypatch.setattr(Call, "commit", takeover_after_the_first_seal)
    closed = a.close_epoch(attempt, request_id="close-A")
    monkeypatch.setattr(Call, "commit", real_commit)
    assert raced and closed.overtaken is not None and closed.overtaken.change == "superseded"
    assert a.seal(1, "p1").attempt == attempt.token and a.seal(1, "p2") is None
    assert doc(zk, a.paths.seal(1, 1, "p1"))["request"] == "close-A"
