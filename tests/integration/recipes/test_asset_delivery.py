"""Asset delivery in the core: the versioned delivery cursor (which still reads the bare numbers
written before it), the claim that keeps two deliverers of one scope from delivering a seal twice,
and the bounded compare-and-set that moves the cursor."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from airflow_epochs.coordination import EpochLedger, PipelineConfig, PipelinePaths
from airflow_epochs.coordination.base.errors import ContentionExhausted, CorruptPayload
from airflow_epochs.coordination.base.znode import Znode
from airflow_epochs.coordination.recipes.delivery.delivery import (
    MAX_CURSOR_ROUNDS,
    Delivery,
    SealToDeliver,
    VersionToDeliver,
)
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor


class KazooStore:
    """The node store delivery needs, on a real (synchronous) kazoo client."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    async def get(self, path: str, watch: Any = None) -> Znode | None:
        if self.client.exists(path, watch=watch) is None:
            return None
        return Znode(*self.client.get(path))

    async def exists(self, path: str, watch: Any = None) -> Any:
        return self.client.exists(path, watch=watch)

    async def children(self, path: str, watch: Any = None) -> list[str] | None:
        if self.client.exists(path) is None:
            return None
        return self.client.get_children(path, watch=watch)

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False) -> str:
        return self.client.create(path, value, ephemeral=ephemeral, makepath=True)

    async def set(self, path: str, value: bytes, version: int = -1) -> Any:
        return self.client.set(path, value, version=version)

    async def delete(self, path: str, version: int = -1) -> None:
        self.client.delete(path, version=version)

    def session_id(self) -> int | None:
        return None if self.client.client_id is None else int(self.client.client_id[0])


def _delivery(scope: str = "deploy", from_epoch: int = 1) -> Delivery:
    return Delivery(PipelinePaths("p"), scope, "a", from_epoch)


def test_the_cursor_is_a_versioned_payload_and_reads_the_bare_numbers_written_before(zk):
    delivery, store = _delivery(), KazooStore(zk)
    assert asyncio.run(delivery.committed(store)) == 1  # no cursor yet: from_epoch
    zk.create(delivery.cursor, b"7", makepath=True)  # as written before the cursor was versioned
    assert asyncio.run(delivery.committed(store)) == 7
    asyncio.run(delivery.move_cursor(store, 9))
    raw = zk.get(delivery.cursor)[0]
    assert b'"kind":"asset_cursor"' in raw and DeliveryCursor.from_bytes(raw, path=delivery.cursor).following == 9
    assert asyncio.run(delivery.committed(store)) == 9
    with pytest.raises(CorruptPayload):
        DeliveryCursor.from_bytes(b'{"schema": 2, "kind": "frontier", "epoch": 3}', path=delivery.cursor)


def test_a_claimed_seal_is_delivered_by_one_deliverer_of_a_scope(zk, zk_factory):
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    first, second = KazooStore(zk), KazooStore(zk_factory())
    delivery = _delivery()
    found = asyncio.run(delivery.next_seal(first, 1, lambda _event: None))
    assert isinstance(found, SealToDeliver)
    assert (found.epoch, found.generation, found.attempt) == (1, 1, 1)
    assert asyncio.run(delivery.next_seal(second, 1, lambda _event: None)) is None  # claimed: wait
    assert asyncio.run(delivery.next_seal(first, 2, lambda _event: None)) is None  # not sealed yet
    asyncio.run(delivery.move_cursor(first, 2))
    asyncio.run(delivery.drop_claims(first, [found.claim]))
    assert zk.exists(found.claim) is None
    assert asyncio.run(delivery.next_seal(second, 1, lambda _event: None)) == 2  # stored: look at the next


class DeliveredBeforeOurCreate(KazooStore):
    """A deliverer's store whose claim create runs only after ``first`` ran: the interleaving where another
    deliverer of the scope claims the seal, has it stored, moves the cursor and lets the claim go between
    this deliverer's look at the cursor and its create."""

    def __init__(self, client: KazooClient, first: Any) -> None:
        super().__init__(client)
        self.first = first

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False) -> str:
        if self.first is not None:
            first, self.first = self.first, None
            await first()
        return await super().create(path, value, ephemeral=ephemeral)


@pytest.mark.parametrize("shared_session", [False, True], ids=["two-sessions", "one-session"])
def test_a_seal_delivered_between_a_look_at_the_cursor_and_the_claim_is_not_delivered_again(
        zk, zk_factory, shared_session):
    """Found as ``[1, 2, 2, 3, 3]`` from two watchers of one scope: the claim a late deliverer creates
    after the first let it go is taken again, and the cursor is read again under it."""
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    one = _delivery()
    delivered: list[SealToDeliver] = []

    async def deliver_all_of_it() -> None:
        found = await one.next_seal(KazooStore(zk), 1, _wake)
        assert isinstance(found, SealToDeliver)
        delivered.append(found)
        await one.move_cursor(KazooStore(zk), 2)
        await one.drop_claims(KazooStore(zk), [found.claim])

    late = DeliveredBeforeOurCreate(zk if shared_session else zk_factory(), deliver_all_of_it)
    assert asyncio.run(_delivery().next_seal(late, 1, _wake)) == 2  # stored meanwhile: look at the next
    assert late.first is None and len(delivered) == 1  # the interleaving happened
    assert zk.exists(delivered[0].claim) is None  # the late claim was let go again


def test_moving_the_cursor_gives_up_after_a_bounded_number_of_lost_rounds(zk):
    """Pure logic around the client: a store that always loses the compare-and-set."""
    delivery = _delivery()
    zk.create(delivery.cursor, DeliveryCursor(3).to_bytes(), makepath=True)
    store = KazooStore(zk)
    rounds = []

    async def always_lost(path: str, value: bytes, version: int = -1) -> Any:
        rounds.append(version)
        raise BadVersionError()

    store.set = always_lost  # type: ignore[method-assign]
    with pytest.raises(ContentionExhausted, match="delivery cursor"):
        asyncio.run(delivery.move_cursor(store, 4))
    assert len(rounds) == MAX_CURSOR_ROUNDS
    assert DeliveryCursor.from_bytes(zk.get(delivery.cursor)[0], path=delivery.cursor).following == 3


def test_a_claim_whose_reply_was_lost_is_recognised_as_its_own_and_another_claim_is_still_respected(
        zk, zk_factory, proxy, lossy):
    """The answer to the deliverer's claim is lost (the proxy drops it after ZooKeeper committed it):
    looking again, the claim exists, its ``ephemeralOwner`` is the deliverer's own session and it holds
    its token, so it holds the claim and delivers; a second deliverer still waits for it, on another
    session or on the same one (two triggers of one triggerer share its client)."""
    from kazoo.exceptions import ConnectionLoss

    from airflow_epochs.triggers.async_zk import AsyncZooKeeper

    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    delivery = _delivery()
    claim = DeliveryPaths(PipelinePaths("p")).claim("deploy", 1, 1, "a")
    lossy.ensure_path(DeliveryPaths(PipelinePaths("p")).scope("deploy"))

    async def deliver_after_a_lost_reply() -> Any:
        store = AsyncZooKeeper(lossy, asyncio.get_running_loop())
        proxy.drop_next_committed_write()
        with pytest.raises(ConnectionLoss):
            await delivery.next_seal(store, 1, lambda _event: None)
        assert proxy.dropped, "the claim's answer was not dropped"
        for _ in range(200):  # kazoo reconnects through the proxy with the same session
            if lossy.connected:
                break
            await asyncio.sleep(0.05)
        return await delivery.next_seal(store, 1, lambda _event: None)

    found = asyncio.run(deliver_after_a_lost_reply())
    stat = zk.exists(claim)
    assert stat is not None and stat.ephemeralOwner == lossy.client_id[0]
    assert isinstance(found, SealToDeliver) and (found.epoch, found.claim) == (1, claim)
    other, twin = KazooStore(zk_factory()), KazooStore(lossy)
    assert asyncio.run(_delivery().next_seal(other, 1, lambda _event: None)) is None  # held by the first: wait
    assert asyncio.run(_delivery().next_seal(twin, 1, lambda _event: None)) is None  # same session, not its claim
    asyncio.run(delivery.drop_claims(KazooStore(lossy), [found.claim]))
    assert zk.exists(claim) is None


def test_a_retired_scope_no_longer_holds_compaction_back(zk, zk_factory, zk_server, zk_chroot, capsys,
                                                         monkeypatch):
    """A scope whose triggerer is gone holds compaction at its cursor. Retiring it is refused for an
    unknown scope (named, with the scopes there are) and while a deliverer holds a claim in it, both
    before any write; once its deliverer's session is gone the CLI retires it and compaction proceeds."""
    from airflow_epochs.cli import main
    from airflow_epochs.coordination import DeliveryScopeHeld, UnknownDeliveryScope

    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}, retain_epochs=2))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    store, gone = KazooStore(zk), _delivery("gone")
    found = asyncio.run(gone.next_seal(store, 1, lambda _event: None))
    assert isinstance(found, SealToDeliver)
    asyncio.run(gone.move_cursor(store, 2))  # the deployment delivered epoch 1, then went away for good
    asyncio.run(gone.drop_claims(store, [found.claim]))
    for epoch in range(2, 9):
        ledger.vote(ledger.open_epoch(epoch), "a", "x")
    assert ledger.compact().through == 1  # held at the abandoned cursor, not at 8 - 2

    with pytest.raises(UnknownDeliveryScope, match=r"no delivery scope 'nobody' \(its scopes: 'gone'\)"):
        ledger.retire_delivery_scope("nobody")
    # a deliverer of the scope (another session) holds the claim of epoch 2 right now
    deliverer = zk_factory()
    held = asyncio.run(_delivery("gone").next_seal(KazooStore(deliverer), 2, lambda _event: None))
    assert isinstance(held, SealToDeliver)
    events = len(ledger.history())
    owner = f"session 0x{deliverer.client_id[0]:x}"
    with pytest.raises(DeliveryScopeHeld, match=rf"'gone' .* held: 1 claim\(s\) .* {owner}"):
        ledger.retire_delivery_scope("gone")
    assert zk.exists(gone.cursor) is not None and zk.exists(held.claim) is not None  # nothing was written
    assert len(ledger.history()) == events
    deliverer.stop()  # its session ends and the claim with it
    deliverer.close()

    monkeypatch.setenv(*zk_server.state_env)
    hosts = zk_server.cli_args(zk_chroot)
    assert main(["retire-scope", "p", "bad/scope", *hosts]) == 2
    assert "'bad/scope'" in capsys.readouterr().err
    assert main(["retire-scope", "p", "gone", *hosts]) == 0
    assert "retired delivery scope 'gone' of pipeline 'p' (its cursors: a at epoch 2)" in capsys.readouterr().out
    assert zk.exists(DeliveryPaths(PipelinePaths("p")).scope("gone")) is None
    assert ledger.delivery_scopes() == []
    retired = [e for e in ledger.history() if e.event == "delivery_scope_retired"]
    assert [(e.detail["scope"], e.detail["cursors"]) for e in retired] == [("gone", {"a": 2})]
    assert ledger.compact().through == 6  # retain_epochs alone decides again


def test_retiring_a_scope_again_with_its_request_id_answers_as_before(zk):
    from airflow_epochs.coordination import UnknownDeliveryScope

    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    delivery, store = _delivery("old"), KazooStore(zk)
    asyncio.run(delivery.move_cursor(store, 2))
    first = ledger.retire_delivery_scope("old", request_id="retire-old-1")
    assert (first.scope, first.cursors) == ("old", {"a": 2})
    assert ledger.retire_delivery_scope("old", request_id="retire-old-1") == first  # found, not applied again
    with pytest.raises(UnknownDeliveryScope, match="'old'"):  # a new request: the scope is gone
        ledger.retire_delivery_scope("old")
    assert len([e for e in ledger.history() if e.event == "delivery_scope_retired"]) == 1


def test_the_cli_refuses_an_unknown_scope_in_one_line(zk, zk_server, zk_chroot):
    import subprocess
    import sys
    from pathlib import Path

    EpochLedger(zk, "p", owner="A").create_pipeline(PipelineConfig({"a": ("x",)}))
    cli = str(Path(sys.executable).parent / "airflow-epochs")
    done = subprocess.run([cli, "retire-scope", "p", "ghost", *zk_server.cli_args(zk_chroot)],
                          env=zk_server.env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: pipeline 'p' has no delivery scope 'ghost' (its scopes: none); "
                                   "nothing was written")


def test_a_claim_taken_between_the_check_and_the_commit_refuses_the_retirement(zk, zk_factory, monkeypatch):
    """The transaction deletes the scope node itself, which ZooKeeper refuses while a child is left: a
    deliverer's claim taken after the check (here: just before the commit) fails the whole transaction,
    and the check, run again, refuses. Nothing was deleted."""
    from airflow_epochs.coordination import DeliveryScopeHeld
    from airflow_epochs.coordination.base.call import Call

    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    ledger.vote(ledger.open_epoch(1), "a", "x")
    scope = _delivery("racing")
    asyncio.run(scope.move_cursor(KazooStore(zk), 1))
    deliverer = zk_factory()
    commit = Call.try_commit
    claimed: list[object] = []

    def claim_first(self: Call, steps: Any) -> Any:
        if not claimed:  # the deliverer wins the race to the scope, between the check and the commit
            claimed.append(asyncio.run(_delivery("racing").next_seal(KazooStore(deliverer), 1, lambda _e: None)))
        return commit(self, steps)

    monkeypatch.setattr(Call, "try_commit", claim_first)
    with pytest.raises(DeliveryScopeHeld, match="'racing'"):
        ledger.retire_delivery_scope("racing")
    assert isinstance(claimed[0], SealToDeliver) and zk.exists(claimed[0].claim) is not None
    assert zk.exists(scope.cursor) is not None
    assert not [e for e in ledger.history() if e.event == "delivery_scope_retired"]


def _resealed(zk) -> EpochLedger:
    """Pipeline ``p``: ``a`` sealed at epochs 1 and 2, then ``a`` at 1 re-sealed as version 2."""
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    for epoch in (1, 2):
        ledger.vote(ledger.open_epoch(epoch), "a", "x", {"value": epoch})
    return ledger


def _wake(_event: Any) -> None:
    return None


def test_a_resealed_version_is_delivered_once_per_scope_and_never_again(zk, zk_factory):
    ledger = _resealed(zk)
    first, second = KazooStore(zk), KazooStore(zk_factory())
    one, two = _delivery(), _delivery()  # two deliverers of one scope (two triggerers)
    assert asyncio.run(one.next_version(first, 3, _wake)) is None  # nothing re-sealed yet
    opened = ledger.corrections.reseal(1, "a", reason="late input")
    assert asyncio.run(one.next_version(first, 3, _wake)) is None  # version 2 open, not sealed
    assert ledger.corrections.vote_version(1, "a", opened.version, "x", {"value": 10}).sealed
    assert asyncio.run(one.next_version(first, 1, _wake)) is None  # the cursor is not past epoch 1 yet
    found = asyncio.run(one.next_version(first, 3, _wake))
    assert isinstance(found, VersionToDeliver)
    assert (found.epoch, found.generation, found.version, found.correction) == (1, 1, 2, opened.correction)
    assert asyncio.run(two.next_version(second, 3, _wake)) is None  # claimed: the other waits
    assert asyncio.run(one.next_version(first, 3, _wake, {found.claim})) is None  # handed over: not again
    again = asyncio.run(one.next_version(first, 3, _wake))  # its own claim (a lost answer): still its own
    assert again == found
    asyncio.run(one.version_delivered(first, found.claim, found.sent))
    assert zk.exists(found.claim) is None and zk.exists(found.sent) is not None
    for delivery, store in ((one, first), (two, second), (_delivery(), KazooStore(zk_factory()))):
        assert asyncio.run(delivery.next_version(store, 3, _wake)) is None  # delivered: never again
    assert asyncio.run(_delivery(scope="other").next_version(first, 3, _wake)) is not None  # its own scope


class StaleFirstLook(KazooStore):
    """Answers the first look at a ``,sent`` record as it was before another deliverer stored it."""

    looked = False

    async def exists(self, path: str, watch: Any = None) -> Any:
        if path.endswith(",sent") and not self.looked:
            self.looked = True
            return None
        return await super().exists(path, watch)


def test_a_claim_taken_just_after_another_deliverer_let_it_go_does_not_deliver_the_version_twice(zk, zk_factory):
    ledger = _resealed(zk)
    opened = ledger.corrections.reseal(1, "a", reason="late input")
    ledger.corrections.vote_version(1, "a", opened.version, "x", {"value": 10})
    one = _delivery()
    found = asyncio.run(one.next_version(KazooStore(zk), 3, _wake))
    assert isinstance(found, VersionToDeliver)
    asyncio.run(one.version_delivered(KazooStore(zk), found.claim, found.sent))
    late = StaleFirstLook(zk_factory())
    assert asyncio.run(_delivery().next_version(late, 3, _wake)) is None
    assert late.looked and zk.exists(found.claim) is None  # its claim taken and let go again


def test_retiring_a_scope_removes_the_records_of_delivered_versions(zk):
    ledger = _resealed(zk)
    opened = ledger.corrections.reseal(1, "a", reason="late input")
    ledger.corrections.vote_version(1, "a", opened.version, "x", {"value": 10})
    delivery, store = _delivery(), KazooStore(zk)
    asyncio.run(delivery.move_cursor(store, 3))
    found = asyncio.run(delivery.next_version(store, 3, _wake))
    assert isinstance(found, VersionToDeliver)
    asyncio.run(delivery.version_delivered(store, found.claim, found.sent))
    retired = ledger.retire_delivery_scope("deploy")
    assert retired.cursors == {"a": 3} and zk.exists(DeliveryPaths(PipelinePaths("p")).scope("deploy")) is None


def _expire(client: KazooClient, zk_factory: Any) -> None:
    """Expire ``client``'s session (a second client on the same session id closes it) and wait until
    ``client`` is connected again on a new session."""
    old = client.client_id
    twin = zk_factory(client_id=old)
    twin.stop()
    twin.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # reconnecting
            client.exists("/")
            if client.client_id is not None and client.client_id[0] != old[0]:
                return
        time.sleep(0.1)
    raise AssertionError("the session did not expire")


def test_a_late_confirmation_of_a_deliverer_whose_session_expired_never_moves_the_cursor_back(zk, zk_factory):
    """A hands seal 1 over; its session expires (its claim with it); B delivers 1 again (the documented
    at-least-once window) and 2; then A's confirmation of 1 arrives. The cursor only moves forward, and A
    lets go only of a claim that holds its own token."""
    ledger = EpochLedger(zk, "p", owner="A")
    ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
    for epoch in (1, 2, 3):
        ledger.vote(ledger.open_epoch(epoch), "a", "x")
    a_client, b_client = zk_factory(), zk_factory()
    a, b = KazooStore(a_client), KazooStore(b_client)
    one, two = _delivery(), _delivery()
    found = asyncio.run(one.next_seal(a, 1, _wake))
    assert isinstance(found, SealToDeliver)
    _expire(a_client, zk_factory)
    assert zk.exists(found.claim) is None
    for epoch in (1, 2):
        got = asyncio.run(two.next_seal(b, epoch, _wake))
        assert isinstance(got, SealToDeliver) and got.epoch == epoch
        asyncio.run(two.move_cursor(b, epoch + 1))
        asyncio.run(two.drop_claims(b, [got.claim]))
    third = asyncio.run(two.next_seal(b, 3, _wake))  # B holds seal 3's claim now
    assert isinstance(third, SealToDeliver)
    asyncio.run(one.move_cursor(a, 2))  # A's late confirmation
    asyncio.run(one.drop_claims(a, [found.claim, third.claim]))  # (as if A had held 3 too)
    assert asyncio.run(one.committed(a)) == 3
    assert zk.exists(third.claim) is not None  # B's claim stays B's
    assert asyncio.run(_delivery().next_seal(KazooStore(zk_factory()), 2, _wake)) == 3  # 2 is not delivered again
