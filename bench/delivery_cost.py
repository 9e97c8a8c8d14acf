"""What delivering one seal as an asset event costs in ZooKeeper requests (group ``cost``): ours, which
also reads the rollbacks counted for delivery (so a rolled-back epoch's new generation is delivered),
beside the same delivery without that record (the delivery as it was before rollbacks were counted).

Each side delivers the same sealed epochs of one partition the way the seal stream does (the next seal
with its claim, the cursor moved, the claim let go), on a store that counts every request.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from common import Row, add, client

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.base.aio import AsyncZooKeeper
from airflow_epochs.coordination.recipes.delivery.delivery import Delivery, Rewound, SealToDeliver
from airflow_epochs.coordination.recipes.delivery.records import DeliveryRewinds


class CountingStore(AsyncZooKeeper):
    """The asynchronous store, counting the requests it sends."""

    requests = 0

    async def _call(self, start: Any) -> Any:
        self.requests += 1
        return await super()._call(start)


class WithoutRewinds(Delivery):
    """The delivery as it was before rollbacks were counted: no read of ``delivery-rewinds``."""

    async def rewinds(self, store: Any, wake: Any = None) -> DeliveryRewinds:
        return DeliveryRewinds()


async def _deliver(delivery: Delivery, store: CountingStore, epochs: int) -> float:
    await delivery.open(store)
    following, seen = await delivery.position(store)
    before = store.requests
    delivered = 0
    while delivered < epochs:
        found = await delivery.next_seal(store, following, lambda _event: None, seen)
        if isinstance(found, Rewound):
            following, seen = found.following, found.rewinds
            continue
        if not isinstance(found, SealToDeliver):
            raise RuntimeError(f"epoch {following} was not deliverable: {found!r}")
        await delivery.move_cursor(store, found.epoch + 1, found.rewinds)
        await delivery.drop_claims(store, [found.claim])
        following, delivered = found.epoch + 1, delivered + 1
    return (store.requests - before) / epochs


def run(hosts: str, epochs: int) -> Row:
    zk = client(hosts)
    try:
        pipeline = f"delivery-{uuid.uuid4().hex[:8]}"
        ledger = EpochLedger(zk, pipeline, owner="bench")
        ledger.create_pipeline(PipelineConfig({"a": ("x",)}))
        for epoch in range(1, epochs + 1):
            ledger.vote(ledger.open_epoch(epoch), "a", "x")

        async def both() -> tuple[float, float]:
            loop = asyncio.get_running_loop()
            ours = await _deliver(Delivery(ledger.paths, "ours", "a", 1), CountingStore(zk, loop), epochs)
            before = await _deliver(WithoutRewinds(ledger.paths, "before", "a", 1), CountingStore(zk, loop), epochs)
            return ours, before

        ours, before = asyncio.run(both())
    finally:
        zk.stop()
        zk.close()
    return add(Row("delivery_requests_per_seal", "cost", "ZooKeeper requests to deliver one seal as an asset event",
                   ours, before, "requests", "delivery without the rollback count", note=(
                       f"{epochs} seals; ours reads the rollbacks counted for delivery at each seal and again "
                       "under its claim, so a rolled-back epoch's new generation is delivered")))
