"""DeclaredKeyEventTrigger: the seal of a partition whose producers are declared (ordinary Airflow tasks
voting through the provider's listener) becomes one asset event carrying the producers' partition key.

It is :class:`~airflow_epochs.triggers.assets.SealedPartitionEventTrigger` (seals in epoch order from
a cursor in ZooKeeper, ack mode: the cursor moves only once Airflow stored the event; an ephemeral
claim keeps a second triggerer from delivering the same seal) with two additions:

- the event's ``partition_key`` is the key the producers used (staged with their votes), not the
  epoch number;
- with ``consumer``, the seal of epoch e is delivered only once that consumer has acknowledged epoch
  e-1 (its first task, :class:`~airflow_epochs.operators.declared.ReceiveDeclaredKeyOperator`, does):
  Airflow folds asset events that arrive before the scheduler creates a run into one run, so holding
  the next key until the previous key's run exists gives one consumer run per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from airflow_epochs.coordination import validate_name
from airflow_epochs.coordination.base.aio import AsyncZooKeeper
from airflow_epochs.coordination.declared.watch import holds_back, staged_key
from airflow_epochs.coordination.recipes.delivery.records import SealedPartitionEvent
from airflow_epochs.triggers.assets import SealedPartitionEventTrigger, SealStream


def delivery_scope(scope: str, consumer: str | None) -> str:
    """Where a consumer's cursor and claims live: ``<consumer>@<scope>``, one per consumer (``scope`` when
    there is no consumer). Two consumers of one partition sharing the scope's cursor would split its keys:
    the first to deliver a key moves the cursor past it for both."""
    return validate_name("owner", scope if consumer is None else f"{consumer}@{validate_name('owner', scope)}")


class DeclaredKeyStream(SealStream):
    """The seals of one declared partition, in epoch order, each with its partition key.

    :param consumer: deliver epoch e only after this consumer acknowledged e-1 (None: no holding).
    """

    def __init__(self, *, scope: str, consumer: str | None = None, **kwargs: Any) -> None:
        consumer = None if consumer is None else validate_name("consumer", consumer)
        super().__init__(scope=delivery_scope(scope, consumer), **kwargs)
        self.consumer = consumer
        self.outstanding: int | None = None  # the epoch handed to Airflow and not yet confirmed stored

    async def hold(self, zk: AsyncZooKeeper, epoch: int, wake: Any) -> bool:
        if self.consumer is None:
            return False
        # Not registered yet: only the first key goes out (nothing outstanding, no cursor yet).
        delivered_before = self.outstanding is not None or await self.delivery.started(zk)
        return await holds_back(zk, self.paths, self.consumer, epoch, wake, delivered_before=delivered_before)

    async def describe(self, zk: AsyncZooKeeper, event: SealedPartitionEvent) -> SealedPartitionEvent:
        key = await staged_key(zk, self.paths, event.epoch)
        if event.version == 1:  # a re-sealed version is not the key the consumer acknowledges
            self.outstanding = event.epoch
        return replace(event, partition_key=key, declared=True)

    async def delivered(self, epoch: int, claims: Sequence[str], rewinds: int = 0) -> None:
        await super().delivered(epoch, claims, rewinds)
        self.outstanding = None


class DeclaredKeyEventTrigger(SealedPartitionEventTrigger):
    """Emit one asset event per sealed epoch of a declared partition, with the producers' partition key.

    :param pipeline: pipeline name.
    :param partition: the declared partition.
    :param consumer: the consumer whose acknowledgement of a key releases the next (see the module).
    :param scope: the delivery scope (one per Airflow deployment); with ``consumer``, the cursor and claims
        are the consumer's own, in scope ``<consumer>@<scope>`` (see :func:`delivery_scope`).
    :param from_epoch: the first epoch to report.
    """

    def __init__(self, *, consumer: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.consumer = None if consumer is None else validate_name("consumer", consumer)

    def _kwargs(self) -> dict[str, Any]:
        return {**super()._kwargs(), "consumer": self.consumer}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return "airflow_epochs.triggers.declared.DeclaredKeyEventTrigger", self._kwargs()

    def shared_stream_key(self) -> tuple[str, ...]:
        return ("airflow_epochs.declared", *super().shared_stream_key()[1:], self.consumer or "")

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> DeclaredKeyStream:
        return DeclaredKeyStream(**kwargs)
