"""Asset delivery: handing a partition's seals to a consumer (Airflow's triggerer) in epoch order,
at least once, with a cursor in ZooKeeper that moves only once a seal was stored.

Per delivery scope and partition the cursor (:class:`~.wire.DeliveryCursor`) names the next epoch to
deliver. :func:`next_seal` decides what to do about one epoch: wait (nothing to deliver yet, or
another deliverer holds it), look elsewhere (the cursor moved past it, or a rollback moved the
frontier back), or deliver it, holding an *ephemeral* claim so that a second deliverer of the same
scope waits instead of delivering it twice (the claim goes with its holder's session); the cursor is
read again once the claim is held, since the claim's last holder moves the cursor and then lets the
claim go, possibly between a deliverer's first look and its create. A claim
found existing is the deliverer's own when its ``ephemeralOwner`` is the deliverer's session and it
holds the deliverer's token (an earlier create committed, its answer lost): it goes on delivering;
any other claim is waited for (deliverers in one triggerer share a session: the token tells them
apart). Once the
consumer has stored the event, :func:`move_cursor` moves the cursor past it (compare-and-set,
bounded, forward only) and :func:`drop_claims` lets the claims go (a deliverer deletes only a claim
that holds its own token). A deliverer that ends with seals handed over and not confirmed lets their
claims go itself (:meth:`Delivery.let_go`): its session may live on in a process that shares it, and
a claim nobody will delete would hold every deliverer of the scope back until that session ends.

A re-sealed version (2, 3, ...) of a seal the cursor is already past is delivered once as well
(:meth:`Delivery.next_version`): its own ephemeral claim keeps a second deliverer waiting, and once the
consumer stored its event a persistent ``,sent`` record (:meth:`Delivery.version_delivered`) says so
for good; the record is looked at again after the claim is taken, so a deliverer that took the claim
just after another let it go does not deliver the version twice.

The functions run on any asynchronous node store with kazoo's semantics
(:class:`~airflow_epochs.coordination.base.aio.NodeStore`), so the core stays free of the triggerer's
event loop and of Airflow.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.aio import NodeStore, Watch
from airflow_epochs.coordination.base.errors import ContentionExhausted, CorruptPayload
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.recipes.corrections.records import VersionsNode, reseals_dir, versions_path
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor, DeliveryRewinds
from airflow_epochs.coordination.state.reader import decode_seal
from airflow_epochs.coordination.wire.nodes import EpochNode, FrontierNode

log = logging.getLogger(__name__)

# Compare-and-set rounds a cursor move may lose to other deliverers of the same scope before it gives
# up (each lost round means another deliverer moved the cursor: a handful is already unusual).
MAX_CURSOR_ROUNDS = 50


@dataclass(frozen=True)
class SealToDeliver:
    """A seal this deliverer holds the claim of: deliver it, then move the cursor (with ``rewinds``, the
    rollbacks counted when it was decided) and drop the claim."""

    epoch: int
    generation: int
    attempt: int
    zxid: int
    claim: str
    rewinds: int = 0


@dataclass(frozen=True)
class Rewound:
    """Rollbacks came since the deliverer last looked: deliver from ``following`` on again (the new
    generations of the epochs they undid), now having seen ``rewinds`` of them."""

    following: int
    rewinds: int


@dataclass(frozen=True)
class VersionToDeliver:
    """A re-sealed version this deliverer holds the claim of: deliver it, then :meth:`Delivery.version_delivered`."""

    epoch: int
    generation: int
    version: int
    correction: str
    claim: str
    sent: str


@dataclass(frozen=True)
class Delivery:
    """One delivery scope's view of one partition's seals."""

    paths: PipelinePaths
    scope: str
    partition: str
    from_epoch: int
    #: written into this deliverer's claims: deliverers in one process share a session, so the session
    #: alone does not say whose a claim is
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def cursor(self) -> str:
        return DeliveryPaths(self.paths).cursor(self.scope, self.partition)

    async def open(self, store: NodeStore) -> None:
        """Make sure the scope's folder exists (its cursor and claims live there)."""
        await store.ensure_path(DeliveryPaths(self.paths).scope(self.scope))

    async def started(self, store: NodeStore) -> bool:
        """Whether anything of this partition was ever delivered in this scope (its cursor exists)."""
        return await store.exists(self.cursor) is not None

    async def rewinds(self, store: NodeStore, wake: Watch | None = None) -> DeliveryRewinds:
        """The pipeline's rollbacks as delivery counts them (``wake`` hears of the next one)."""
        path = DeliveryPaths(self.paths).rewinds
        node = await store.get(path, wake)
        return DeliveryRewinds() if node is None else DeliveryRewinds.from_bytes(node[0], path=path)

    async def position(self, store: NodeStore, rewinds: DeliveryRewinds | None = None) -> tuple[int, int]:
        """The next epoch to deliver, as the cursor records it with the rollbacks its writer had not seen
        applied (never before ``from_epoch``), and how many rollbacks there were (``rewinds``: as just
        read by the caller; read here otherwise)."""
        if rewinds is None:
            rewinds = await self.rewinds(store)
        node = await store.get(self.cursor)
        if node is None or not node[0]:
            return self.from_epoch, rewinds.count
        cursor = DeliveryCursor.from_bytes(node[0], path=self.cursor)
        return max(self.from_epoch, rewinds.position(cursor)), rewinds.count

    async def committed(self, store: NodeStore) -> int:
        """The next epoch to deliver, as the cursor records it (see :meth:`position`)."""
        return (await self.position(store))[0]

    async def next_seal(self, store: NodeStore, epoch: int, wake: Watch,
                        seen: int = 0) -> SealToDeliver | Rewound | int | None:
        """The seal of ``epoch`` with its claim taken, or where to look instead (an epoch, or
        :class:`Rewound` when rollbacks came since the deliverer had seen ``seen`` of them), or None
        (wait: ``wake`` is left on whatever must change first)."""
        rewinds = await self.rewinds(store, wake)  # a rollback wakes the deliverer
        back = rewinds.since(seen)
        if back is not None:
            return Rewound(max(self.from_epoch, min(epoch, back + 1)), rewinds.count)
        committed = (await self.position(store, rewinds))[0]
        frontier_node = await store.get(self.paths.frontier, wake)
        if frontier_node is None:
            return None
        frontier = FrontierNode.from_bytes(frontier_node[0], path=self.paths.frontier).epoch
        if committed > frontier + 2:
            # A seal of epoch e exists only while e - 1 is sealed, so no deliverer moves a cursor past the
            # frontier + 2: one that says so was written by someone else, and would skip seals silently.
            raise CorruptPayload(f"{self.cursor}: the delivery cursor says epoch {committed} is next, past the "
                                 f"frontier {frontier} + 2: not a cursor a deliverer wrote; nothing was delivered")
        if committed > epoch:
            return committed  # another deliverer delivered it and the consumer stored it
        if frontier < epoch - 1 and epoch > committed:
            return max(self.from_epoch, frontier + 1)  # rolled back: deliver the new seals again
        record = await store.get(self.paths.epoch(epoch), wake)
        if record is None:
            return None
        node = EpochNode.from_bytes(record[0], path=self.paths.epoch(epoch))
        if node.state == "rolled_back":
            return None
        seal_path = self.paths.seal(epoch, node.generation, self.partition)
        seal = await store.get(seal_path, wake)
        if seal is None:
            return None
        claim = DeliveryPaths(self.paths).claim(self.scope, epoch, node.generation, self.partition)
        try:
            await store.create(claim, self.holder.encode(), ephemeral=True)
        except NodeExistsError:
            held = await store.get(claim, wake)
            if held is None:
                return epoch  # its holder's session ended meanwhile: look again
            if await self._planted(store, claim, held):
                return epoch
            if held[1].ephemeralOwner != store.session_id() or held[0] != self.holder.encode():
                return None  # another deliverer holds it: wait for its claim to go
            # Our own claim: an earlier create committed but its answer was lost. We hold it.
        # Looked at again under the claim: another deliverer may have delivered the seal, moved the
        # cursor and let the claim go between our first look and our create (it moves before it lets go);
        # or a rollback came since the count was read (the seal may be of a generation it undid).
        moved, counted = await self.position(store)
        if moved > epoch or counted != rewinds.count:
            await self.let_go(store, claim)
            return moved if counted == rewinds.count else epoch
        sealed = decode_seal(seal, epoch, self.partition, seal_path)
        return SealToDeliver(epoch, node.generation, sealed.attempt, sealed.zxid, claim, rewinds.count)

    async def next_version(self, store: NodeStore, below: int, wake: Watch,
                           handed: Collection[str] = ()) -> VersionToDeliver | None:
        """A sealed version >= 2 of this partition at an epoch in ``from_epoch .. below - 1`` (seals the
        cursor is past) whose event was not stored yet, with its claim taken, oldest epoch and version
        first; None if there is none now (``wake`` is left on the re-seals and on any claim waited for).
        Versions of an opening a rollback replaced are history, never delivered.

        :param handed: claims of versions this deliverer handed over and awaits the storing of (skipped).
        """
        suffix = f":{self.partition}"
        names = await store.children(reseals_dir(self.paths), wake)
        if names is None:  # nothing re-sealed yet: a child watch needs the folder, so watch its creation
            if await store.exists(reseals_dir(self.paths), wake) is None:
                return None
            names = await store.children(reseals_dir(self.paths), wake) or []
        keys = sorted(int(name[:-len(suffix)]) for name in names
                      if name.endswith(suffix) and name[:-len(suffix)].isdigit())
        for epoch in (e for e in keys if self.from_epoch <= e < below):
            path = versions_path(self.paths, epoch, self.partition)
            raw = await store.get(path, wake)  # its data changes when a version seals
            record = await store.get(self.paths.epoch(epoch))
            if raw is None or record is None:
                continue  # compacted: nothing of it is delivered any more
            node = VersionsNode.from_bytes(raw[0], path=path)
            epoch_node = EpochNode.from_bytes(record[0], path=self.paths.epoch(epoch))
            if node.generation != epoch_node.generation:
                continue
            for entry in sorted((e for e in node.entries if e.state == "sealed"), key=lambda e: e.version):
                if DeliveryPaths(self.paths).version_claim(self.scope, epoch, node.generation, self.partition,
                                                  entry.version) in handed:
                    continue
                found = await self._claim_version(store, epoch, node.generation, entry.version, wake)
                if found is True:
                    continue  # delivered before
                if found is False:
                    return None  # another deliverer holds it: its claim's watch wakes us
                return VersionToDeliver(epoch, node.generation, entry.version, entry.correction, *found)
        return None

    async def _claim_version(self, store: NodeStore, epoch: int, generation: int, version: int,
                             wake: Watch) -> tuple[str, str] | bool:
        """(claim, sent record) once this deliverer holds ``version``'s claim; True: its event was
        stored already; False: another deliverer holds the claim."""
        claim = DeliveryPaths(self.paths).version_claim(self.scope, epoch, generation, self.partition, version)
        sent = DeliveryPaths(self.paths).version_sent(self.scope, epoch, generation, self.partition, version)
        if await store.exists(sent) is not None:
            return True
        try:
            await store.create(claim, self.holder.encode(), ephemeral=True)
        except NodeExistsError:
            held = await store.get(claim, wake)
            if held is None or await self._planted(store, claim, held):
                return await self._claim_version(store, epoch, generation, version, wake)  # just let go
            if held[1].ephemeralOwner != store.session_id() or held[0] != self.holder.encode():
                return False
        # Looked at again under the claim: another deliverer may have stored it and let the claim go
        # between our first look and our create.
        if await store.exists(sent) is not None:
            await self.let_go(store, claim)
            return True
        return claim, sent

    async def _planted(self, store: NodeStore, claim: str, held: tuple[bytes, Any]) -> bool:
        """Whether ``claim`` is a persistent node: no deliverer makes one (claims go with their holder's
        session), so it was planted, and would hold every deliverer of the scope back for ever. It is
        deleted (guarded by its version) and the caller looks again."""
        if int(held[1].ephemeralOwner) != 0:
            return False
        log.warning("%s: a persistent node where only ephemeral claims are made (not a deliverer's); deleted",
                    claim)
        with contextlib.suppress(NoNodeError, BadVersionError):
            await store.delete(claim, version=held[1].version)
        return True

    async def version_delivered(self, store: NodeStore, claim: str, sent: str) -> None:
        """The consumer stored the event of the version of ``claim`` (:attr:`VersionToDeliver.claim`):
        record it for good in ``sent``, then let the claim go."""
        with contextlib.suppress(NodeExistsError):
            await store.create(sent)
        await self.let_go(store, claim)

    async def move_cursor(self, store: NodeStore, following: int, rewinds: int = 0) -> None:
        """Move the cursor to ``following``, as a deliverer that had seen ``rewinds`` rollbacks
        (compare-and-set: concurrent deliverers never lose a move). Only a higher ``(rewinds,
        following)`` is written: a deliverer whose claim went with an expired session confirms late,
        after another delivered more (moving back would deliver those again), and a confirmation of an
        event read before a rollback would carry the cursor past the new generation.
        :class:`ContentionExhausted` after :data:`MAX_CURSOR_ROUNDS` lost rounds."""
        data = DeliveryCursor(following, rewinds).to_bytes()
        for _ in range(MAX_CURSOR_ROUNDS):
            node = await store.get(self.cursor)
            try:
                if node is None:
                    await store.create(self.cursor, data)
                elif node[0] and not DeliveryCursor.from_bytes(node[0], path=self.cursor).behind(following, rewinds):
                    return
                else:
                    await store.set(self.cursor, data, version=node[1].version)
                return
            except (BadVersionError, NodeExistsError):
                continue
        raise ContentionExhausted(
            f"{self.cursor}: lost {MAX_CURSOR_ROUNDS} compare-and-set rounds moving the delivery cursor to "
            f"{following}; the cursor stays where another deliverer left it (the seals are delivered again)"
        )

    async def drop_claims(self, store: NodeStore, claims: Sequence[str]) -> None:
        """Let the claims of delivered seals go (one already gone went with its session)."""
        for claim in claims:
            await self.let_go(store, claim)

    async def let_go(self, store: NodeStore, claim: str) -> None:
        """Delete ``claim`` if this deliverer holds it (its session, its token): a claim that went with an
        expired session and was taken since is another deliverer's, and stays."""
        held = await store.get(claim)
        if held is None or held[0] != self.holder.encode() or held[1].ephemeralOwner != store.session_id():
            return
        with contextlib.suppress(NoNodeError, BadVersionError):
            await store.delete(claim, version=held[1].version)
