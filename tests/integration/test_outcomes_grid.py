"""The exhaustive lost-answer grid: for every call family, the answer of each of its committed writes
is dropped in turn (the proxy); between the commit and the caller's retry another owner runs one call
family (nothing, a takeover, an abort, a rollback, a close, votes, sealing and compaction, a lease
takeover, a consumer's removal); then the caller repeats with its request id, and once more as a new
request. Every answer is checked against what ZooKeeper holds (``outcome_oracle``):

- a request that committed and is still on record is answered with a result, never a refusal; the
  result carries ``overtaken`` exactly when what the request did is no longer current;
- "nothing was written" appears only for a request that is not on record (and, for a repeat, when
  the call changed no znode);
- a repeat with the request id changes no znode (never applied twice);
- a refusal is an :class:`EpochsError`, and ``OutcomeUnknown`` names the caller's request id.

One ZooKeeper server and one proxy serve every case; each case gets a fresh chroot.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.client import KazooClient
from outcome_oracle import attempt_is_current, attempt_sealed_epoch, dead_vote, doc, dump, on_record
from zk_proxy import LostAnswerProxy

from airflow_epochs.coordination import (
    EpochLedger,
    EpochsError,
    LeaderLease,
    OutcomeUnknown,
    PipelineConfig,
)

pytestmark = [pytest.mark.integration]

P = "grid"
CONFIG = PipelineConfig({"a": ("x", "y"), "b": ("z",)}, retain_epochs=1)
VOTES = (("a", "x"), ("a", "y"), ("b", "z"))
LEASE = datetime.timedelta(seconds=30)
FIRST, SECOND = "first-request", "second-request"


def lease(client: KazooClient, owner: str = "A", later: float = 0.0) -> LeaderLease:
    return EpochLedger(client, P, owner=owner, clock=lambda: time.time() + later).lease(duration=LEASE)


def seal(ledger: EpochLedger, epoch: int) -> None:
    attempt = ledger.open_epoch(epoch)
    for partition, producer in VOTES:
        ledger.vote(attempt, partition, producer)


# -- the call families (A) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    setup: Callable[[EpochLedger, EpochLedger, KazooClient], dict[str, Any]]
    call: Callable[[EpochLedger, dict[str, Any], str | None], Any]
    check: Callable[[KazooClient, EpochLedger, dict[str, Any], str | None, Any], None]


def _sealed_one(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    a.create_pipeline(CONFIG)
    seal(a, 1)
    return {}


def _opened_two(*votes: tuple[str, str], dead: tuple[str, str] | None = None):
    def setup(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
        _sealed_one(a, b, zk)
        attempt = a.open_epoch(2)
        for partition, producer in votes:
            a.vote(attempt, partition, producer)
        if dead is not None:
            dead_vote(zk, a, attempt, *dead)
        return {"attempt": attempt}
    return setup


def check_attempt(zk, b, ctx, rid, got) -> None:
    adoc = doc(zk, b.paths.attempt(2, got.token))
    edoc = doc(zk, b.paths.epoch(2))
    assert adoc is not None and (rid is None or adoc["request"] == rid), (adoc, rid)
    if attempt_is_current(edoc, adoc, got.token, got.generation):
        assert got.overtaken is None, got
    elif attempt_sealed_epoch(edoc, adoc, got.token, got.generation):
        assert got.overtaken is not None and got.overtaken.change == "sealed", got
    else:
        assert got.overtaken is not None and got.overtaken.change != "sealed", (got, edoc, adoc)


def vote_check(partition: str, producer: str):
    def check(zk, b, ctx, rid, got) -> None:
        attempt = ctx["attempt"]
        assert got.attempt == attempt.token
        vote = doc(zk, b.paths.vote(2, attempt.token, partition, producer))
        if vote is None:  # a sole producer's vote lives in its seal; several producers' fold into it
            sealed = doc(zk, b.paths.seal(2, attempt.generation, partition)) or {}
            kept = sealed.get("vote") or (sealed.get("votes") or {}).get(producer)
            vote = kept if sealed.get("attempt") == attempt.token else None
        # a new request for the same vote is an identical repeat (``duplicate``), answered as such
        assert vote is not None and (rid is None or vote["request"] == rid or (got.duplicate and not ctx["committed"]))
        edoc = doc(zk, b.paths.epoch(2))
        adoc = doc(zk, b.paths.attempt(2, attempt.token))
        counted = attempt_is_current(edoc, adoc, attempt.token, attempt.generation) or \
            attempt_sealed_epoch(edoc, adoc, attempt.token, attempt.generation)
        assert (got.overtaken is None) == counted, (got, edoc, adoc)
        if got.partition_sealed:
            seal_doc = doc(zk, b.paths.seal(2, attempt.generation, partition))
            assert seal_doc is not None and seal_doc["attempt"] == attempt.token
        if got.epoch_sealed:
            assert zk.exists(b.paths.epoch_seal(2)) is not None
    return check


def check_abort(zk, b, ctx, rid, got) -> None:
    adoc = doc(zk, b.paths.attempt(2, ctx["attempt"].token))
    assert adoc is not None and (rid is None or adoc["aborted_by"] == rid), adoc
    assert (got.overtaken is None) == (adoc["state"] == "aborted"), (got, adoc)


def check_close(zk, b, ctx, rid, got) -> None:
    attempt = ctx["attempt"]
    edoc = doc(zk, b.paths.epoch(2))
    adoc = doc(zk, b.paths.attempt(2, attempt.token))
    sealed_by_it = attempt_sealed_epoch(edoc, adoc, attempt.token, attempt.generation)
    assert (got.overtaken is None) == sealed_by_it, (got, edoc)
    if sealed_by_it:
        assert got.state == "sealed" and zk.exists(b.paths.epoch_seal(2)) is not None


def check_rollback(zk, b, ctx, rid, got) -> None:
    assert got == [2]
    assert rid is None or doc(zk, b.paths.request(rid)) is not None


def check_config(zk, b, ctx, rid, got) -> None:
    version = doc(zk, b.paths.config(got.version))
    assert version is not None and got.from_epoch == 5 and (rid is None or version["request"] == rid)


def check_created(zk, b, ctx, rid, got) -> None:
    record = doc(zk, b.paths.base)
    assert record is not None and got.version == 0


def check_lease(zk, b, ctx, rid, got) -> None:
    held = doc(zk, b.paths.leader)
    assert held is not None
    if got.overtaken is None:
        assert held["owner"] == "A" and (rid is None or held["request"] == rid), held
    else:
        assert held["owner"] != "A" and (rid is None or any(h["owner"] == "A" and h["request"] == rid
                                                            for h in held["recent"])), held


def check_released(zk, b, ctx, rid, got) -> None:
    # False ("was not held") is an answer that nothing was written: never for a committed request
    assert got is True or not ctx["committed"], got
    if rid is not None and got is not True:
        assert not on_record(zk, rid)


def check_registered(zk, b, ctx, rid, got) -> None:
    consumer = doc(zk, b.paths.consumer("c1"))
    if got.overtaken is None:
        assert consumer is not None and (rid is None or consumer["request"] == rid or not ctx["committed"]), consumer
    else:
        assert consumer is None or consumer["request"] != rid


def check_unregistered(zk, b, ctx, rid, got) -> None:
    assert got is True or not ctx["committed"], got  # False says "was not registered": nothing written
    if got is True and rid is not None:
        assert doc(zk, b.paths.request(rid)) is not None
    assert zk.exists(b.paths.consumer("c1")) is None or got is False


def _with_lease(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    a.create_pipeline(CONFIG)
    lease(a.client).acquire()
    return {}


def _with_consumer(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    a.create_pipeline(CONFIG)
    a.consumer("c1").register()
    return {}


def _created(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    a.create_pipeline(CONFIG)
    return {}


def _sealed_two(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    _sealed_one(a, b, zk)
    seal(a, 2)
    return {}


def _taken(a: EpochLedger, b: EpochLedger, zk: KazooClient) -> dict[str, Any]:
    _sealed_one(a, b, zk)
    b.open_epoch(2)
    return {}


FAMILIES = [
    # exist_ok=False: a repeat that did not find its own request would be refused (PipelineExists)
    Family("create_pipeline", lambda a, b, zk: {},
           lambda a, c, rid: a.create_pipeline(CONFIG, exist_ok=False, request_id=rid), check_created),
    Family("set_config", _sealed_one, lambda a, c, rid: a.set_config(CONFIG, from_epoch=5, request_id=rid),
           check_config),
    Family("open_epoch", _sealed_one, lambda a, c, rid: a.open_epoch(2, request_id=rid), check_attempt),
    Family("open_takeover", _taken, lambda a, c, rid: a.open_epoch(2, takeover=True, request_id=rid),
           check_attempt),
    Family("abort_attempt", _opened_two(),
           lambda a, c, rid: a.abort_attempt(c["attempt"], reason="A", request_id=rid), check_abort),
    Family("vote", _opened_two(), lambda a, c, rid: a.vote(c["attempt"], "a", "x", request_id=rid),
           vote_check("a", "x")),
    Family("vote_completing", _opened_two(("a", "x")),
           lambda a, c, rid: a.vote(c["attempt"], "a", "y", request_id=rid), vote_check("a", "y")),
    Family("vote_last", _opened_two(("a", "x"), ("a", "y")),
           lambda a, c, rid: a.vote(c["attempt"], "b", "z", request_id=rid), vote_check("b", "z")),
    Family("close_epoch", _opened_two(("a", "x"), ("b", "z"), dead=("a", "y")),
           lambda a, c, rid: a.close_epoch(c["attempt"], request_id=rid), check_close),
    Family("rollback", _sealed_two, lambda a, c, rid: a.rollback(1, reason="A", request_id=rid), check_rollback),
    Family("lease_acquire", _created, lambda a, c, rid: lease(a.client).acquire(request_id=rid), check_lease),
    Family("lease_release", _with_lease, lambda a, c, rid: lease(a.client).release(request_id=rid),
           check_released),
    Family("consumer_register", _created, lambda a, c, rid: a.consumer("c1").register(request_id=rid),
           check_registered),
    Family("consumer_unregister", _with_consumer, lambda a, c, rid: a.consumer("c1").unregister(request_id=rid),
           check_unregistered),
]


# -- the other owner's calls (B), run between the lost answer and A's retry ----------------------


def _b_vote_all(b: EpochLedger) -> None:
    attempt = b.current_attempt(2)
    for partition, producer in VOTES:
        with contextlib.suppress(EpochsError):
            b.vote(attempt, partition, producer)


def _b_seal_and_compact(b: EpochLedger) -> None:
    _b_vote_all(b)
    b.close_epoch(b.current_attempt(2))
    seal(b, 3)
    assert b.compact().through >= 2


INTERLEAVES: dict[str, Callable[[EpochLedger, KazooClient], Any]] = {
    "nothing": lambda b, zk: None,
    "takeover": lambda b, zk: b.open_epoch(2, takeover=True),
    "abort": lambda b, zk: b.abort_attempt(b.current_attempt(2), reason="B"),
    "rollback": lambda b, zk: b.rollback(1, reason="B"),
    "close": lambda b, zk: b.close_epoch(b.current_attempt(2)),
    "vote": lambda b, zk: _b_vote_all(b),
    "seal_and_compact": lambda b, zk: _b_seal_and_compact(b),
    "lease_takeover": lambda b, zk: lease(zk, "B", later=3600).acquire(),
    "consumer_removal": lambda b, zk: b.consumer("c1").unregister(),
}


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the answer is what is checked
        return exc


def check(family: Family, zk: KazooClient, b: EpochLedger, ctx: dict[str, Any], rid: str | None, got: Any, *,
          committed: bool, before: dict[str, bytes] | None, settled: bool = False) -> None:
    """One answer against ZooKeeper's state (see the module docstring). ``settled``: no answer is being
    dropped any more, so ZooKeeper can always be asked and "unknown" is never a true answer."""
    where = f"{family.name} (request {rid})"
    if isinstance(got, BaseException):
        assert isinstance(got, EpochsError), f"{where}: raw {got!r}"
        message = str(got)
        if isinstance(got, OutcomeUnknown):
            assert not settled, f"{where}: ZooKeeper answers, yet {got!r}"
            assert rid is None or got.request_id == rid, f"{where}: {got!r} names another request"
            return
        if rid is not None and committed and on_record(zk, rid):
            pytest.fail(f"{where}: committed and on record, yet refused: {got!r}")
        if "nothing was written" in message:
            assert not committed, f"{where}: committed, yet {got!r}"
            assert rid is None or not on_record(zk, rid), f"{where}: on record, yet {got!r}"
        if not committed:  # a new request that is refused wrote nothing, whatever the wording
            assert rid is None or not on_record(zk, rid), f"{where}: on record, yet {got!r}"
            assert before is None or dump(zk) == before, f"{where}: wrote, yet {got!r}"
        return
    ctx["committed"] = committed
    family.check(zk, b, ctx, rid, got)


@pytest.fixture(scope="module")
def proxy(zk_server) -> Iterator[LostAnswerProxy]:
    p = LostAnswerProxy(zk_server)
    yield p
    p.close()


@pytest.fixture(scope="module")
def admin(zk_server) -> Iterator[KazooClient]:
    client = zk_server.client()
    yield client
    client.stop()
    client.close()


class Case:
    """A fresh chroot with A's client (through the proxy) and B's (direct), set up for ``family``."""

    def __init__(self, zk_server, admin: KazooClient, proxy: LostAnswerProxy, family: Family, label: str) -> None:
        chroot = f"/grid/{family.name}-{label}-{uuid.uuid4().hex[:6]}"
        admin.ensure_path(chroot)
        self.zk = zk_server.client(chroot, start=False)
        self.lossy = proxy.client(chroot, start=False, timeout=10)
        for client in (self.zk, self.lossy):
            client.start(timeout=15)
        self.a, self.b = EpochLedger(self.lossy, P, owner="A"), EpochLedger(self.zk, P, owner="B")
        self.ctx = family.setup(self.a, self.b, self.zk)

    def close(self) -> None:
        for client in (self.zk, self.lossy):
            client.stop()
            client.close()


_DROP_POINTS: dict[str, int] = {}


def drop_points(zk_server, admin: KazooClient, proxy: LostAnswerProxy, family: Family) -> int:
    """How many committed writes the family's call makes, undisturbed: each is a drop point."""
    if family.name not in _DROP_POINTS:
        case = Case(zk_server, admin, proxy, family, "count")
        try:
            before = proxy.committed
            got = outcome(lambda: family.call(case.a, case.ctx, FIRST))
            assert not isinstance(got, BaseException), got
            _DROP_POINTS[family.name] = proxy.committed - before
        finally:
            case.close()
    return _DROP_POINTS[family.name]


def run_case(zk_server, admin: KazooClient, proxy: LostAnswerProxy, family: Family, interleave: str,
             skip: int) -> None:
    """One (family, drop point, interleaved call) case in a fresh chroot."""
    case = Case(zk_server, admin, proxy, family, f"{interleave}-{skip}")
    a, b, zk, ctx = case.a, case.b, case.zk, case.ctx
    try:
        interleaved: list[Any] = []
        done = threading.Event()

        def interleave_call() -> None:
            interleaved.append(outcome(lambda: INTERLEAVES[interleave](b, zk)))
            done.set()

        dropped = len(proxy.dropped)
        proxy.drop_next_committed_write(skip=skip, on_drop=interleave_call)
        first = outcome(lambda: family.call(a, ctx, FIRST))
        proxy.disarm()
        # A's client may give up on the held connection and retry on a new one before B is done
        assert done.wait(30), f"{family.name}: {interleave} did not finish"
        assert len(proxy.dropped) == dropped + 1, f"{family.name}: write {skip + 1} was not dropped"
        for result in interleaved:  # B's own answers: refusals are fine, anything else is not
            assert not isinstance(result, BaseException) or isinstance(result, EpochsError), result
        check(family, zk, b, ctx, FIRST, first, committed=True, before=None)
        before = dump(zk)
        repeat = outcome(lambda: family.call(a, ctx, FIRST))
        assert dump(zk) == before, f"{family.name}: the repeat of {FIRST} wrote ({repeat!r})"
        check(family, zk, b, ctx, FIRST, repeat, committed=True, before=before, settled=True)
        if not isinstance(first, BaseException) and not isinstance(repeat, BaseException):
            assert getattr(repeat, "overtaken", None) == getattr(first, "overtaken", None), (first, repeat)
        for rid in (SECOND, None):  # a new request, with an id and without one
            before = dump(zk)
            check(family, zk, b, ctx, rid, outcome(lambda rid=rid: family.call(a, ctx, rid)), committed=False,
                  before=before, settled=True)
    finally:
        case.close()


@pytest.mark.parametrize("interleave", list(INTERLEAVES))
@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_every_lost_answer_against_every_interleaved_call(zk_server, admin, proxy, family: Family, interleave: str):
    points = drop_points(zk_server, admin, proxy, family)
    assert points >= 1, f"{family.name}: no committed write to lose"
    for skip in range(points):
        run_case(zk_server, admin, proxy, family, interleave, skip)


# -- a race inside one call: a rollback between the reads of close_epoch's "already sealed" path -------


def test_close_of_an_epoch_its_attempt_sealed_racing_a_rollback_answers_from_one_read(zk_server, admin):
    """A's attempt sealed epoch 2 (a ``vote_many`` ballot); A then closes it as a new request while B
    rolls the epoch back, landing right after A's close read the epoch record (after the request id's
    look-up, which finds nothing: a rollback before it is refused truthfully, "no longer current"). The answer is the
    sealed epoch (what A read) or the same marked ``overtaken=rolled_back``, never a ``rolled_back``
    epoch that says nothing of being overtaken (what a second read of the record gave)."""
    from airflow_epochs.coordination import Ballot

    chroot = f"/grid/close-race-{uuid.uuid4().hex[:6]}"
    admin.ensure_path(chroot)
    clients = [zk_server.client(chroot, start=False) for _ in range(2)]
    for client in clients:
        client.start(timeout=15)
    try:
        a, b = EpochLedger(clients[0], P, owner="A"), EpochLedger(clients[1], P, owner="B")
        a.create_pipeline(CONFIG)
        seal(a, 1)
        attempt = a.open_epoch(2)
        assert all(not isinstance(r, BaseException) for r in
                   a.vote_many(attempt, [Ballot(partition, producer) for partition, producer in VOTES]))
        assert a.epoch_info(2).state == "sealed"
        epoch_path = a.paths.epoch(2)  # kazoo's calls take paths inside the chroot
        original = clients[0].get_async
        rolled: list[Any] = []
        reads: list[str] = []

        class AfterRead:
            """The read's result; B's rollback runs as soon as A has it (once)."""

            def __init__(self, pending: Any) -> None:
                self.pending = pending

            def get(self, timeout: float | None = None) -> Any:
                value = self.pending.get(timeout=timeout)
                if not rolled:
                    rolled.append(b.rollback(1, reason="B rolls epoch 2 back mid-close"))
                return value

        def get_async(path: str, watch: Any = None) -> Any:
            pending = original(path, watch=watch)
            if path != epoch_path or rolled:
                return pending
            reads.append(path)
            # the first read is the request id's look-up (nothing found), the second the close's own
            return AfterRead(pending) if len(reads) == 2 else pending

        clients[0].get_async = get_async  # type: ignore[method-assign]
        try:
            got = outcome(lambda: a.close_epoch(attempt, request_id="a-new-close"))
        finally:
            clients[0].get_async = original  # type: ignore[method-assign]
        assert rolled == [[2]], "the rollback did not land inside the close"
        assert b.epoch_info(2).state == "rolled_back"
        assert not isinstance(got, BaseException), got
        assert (got.epoch, got.attempt, got.generation) == (2, attempt.token, attempt.generation)
        if got.overtaken is None:
            assert got.state == "sealed", got  # what A read: the epoch its attempt sealed
        else:
            assert got.overtaken == "rolled_back", got
    finally:
        for client in clients:
            client.stop()
            client.close()
