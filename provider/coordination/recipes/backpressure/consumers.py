"""Backpressure: consumers acknowledge epochs; a producer does not open epoch e while
e > (slowest registered consumer's acknowledged epoch) + the pipeline's window.

Each consumer is one znode. Registration is create-only (with its request id, and its history
record in the same transaction), acknowledgement is a monotone compare-and-set (repeating it changes
nothing), and unregistration stores its outcome under ``requests/<id>``, so every answer stays true
when ZooKeeper's reply is lost.

The ledger binds these recipes the way kazoo binds ``zk.Lock``: ``ledger.consumer("report")`` is a
:class:`Consumer` and ``ledger.backpressure()`` a :class:`Backpressure` on the ledger's pipeline.
Bound to a ledger as ``ledger.consumer(name)`` and ``ledger.backpressure()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import InvalidInput, StateError
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.base.steps import Create, Delete, SetData
from airflow_epochs.coordination.recipes.backpressure.records import ConsumerRegistration
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import consumer_acks, frontier
from airflow_epochs.coordination.wire.events import ConsumerRegistered, ConsumerUnregistered
from airflow_epochs.coordination.wire.nodes import ConsumerNode
from airflow_epochs.coordination.wire.records import Overtaken

# Consumers one pipeline may have registered at once: the ``consumers`` listing every backpressure
# check reads stays under 1024 x 132 bytes (docs: Bounded answers).
MAX_CONSUMERS = 1024


class UnknownConsumer(StateError):
    """The consumer is not registered."""


class TooManyConsumers(StateError):
    """The pipeline has :data:`MAX_CONSUMERS` consumers registered; nothing was written."""


@dataclass(frozen=True)
class ConsumerState:
    """A consumer and the epoch it acknowledged; ``overtaken`` is set when a repeated registration
    finds it committed and the consumer unregistered since."""

    consumer: str
    acked: int
    overtaken: Overtaken | None = field(default=None, compare=False)


def _register(ctx: PipelineContext, consumer: str, acked: int | None, request_id: str | None) -> ConsumerState:
    path = ctx.paths.consumer(validate_name("consumer", consumer))
    if acked is not None and (isinstance(acked, bool) or not isinstance(acked, int) or acked < 0):
        raise InvalidInput(f"acked must be a non-negative integer, not {acked!r}")

    def body(call: Call) -> ConsumerState:
        existing = call.get(path)
        if existing is not None:
            return ConsumerState(consumer, ConsumerNode.from_bytes(existing.data, path=path).acked)
        folder = call.exists(ctx.paths.consumers)
        if folder is not None and int(folder.numChildren) >= MAX_CONSUMERS:
            raise TooManyConsumers(f"pipeline {ctx.pipeline!r} has {folder.numChildren} consumers registered; at most "
                                   f"{MAX_CONSUMERS}: {consumer!r} was not registered; nothing was written")
        start = frontier(call, ctx) if acked is None else acked
        failure = call.try_commit([
            # bumping the folder's version serialises registrations, so none passes the limit
            *([] if folder is None else [SetData(ctx.paths.consumers, b"", int(folder.version))]),
            Create(path, ConsumerNode(start, ctx.clock(), call.request_id).to_bytes()),
            # findable after the consumer is gone again (unregistered by someone else)
            *ctx.request_op(call, "register_consumer", ConsumerRegistration(consumer, start).to_result()),
            *ctx.event(ConsumerRegistered(consumer=consumer, acked=start)),
        ])
        if failure is not None:
            if isinstance(failure.error, (NodeExistsError, BadVersionError)):
                raise Conflict()  # registered meanwhile: report what is there, or count again
            raise failure.error
        return ConsumerState(consumer, start)

    def find(call: Call) -> ConsumerState | None:
        raw = call.get(path)
        if raw is not None:
            node = ConsumerNode.from_bytes(raw.data, path=path)
            if node.request == call.request_id:
                return ConsumerState(consumer, node.acked)
        stored = ctx.stored_result(call)
        if stored is None:
            return None
        registration = ConsumerRegistration.from_result(stored, consumer=consumer,
                                                        path=ctx.paths.request(call.request_id))
        return ConsumerState(consumer, registration.acked, overtaken=Overtaken("unregistered"))

    return ctx.call(body, what=f"register consumer {consumer!r}", request_id=request_id, find=find)


def _acknowledge(ctx: PipelineContext, consumer: str, epoch: int) -> ConsumerState:
    path = ctx.paths.consumer(validate_name("consumer", consumer))
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise InvalidInput(f"acknowledged epoch must be a non-negative integer, not {epoch!r}")

    def body(call: Call) -> ConsumerState:
        sealed = frontier(call, ctx)
        if epoch > sealed:
            raise InvalidInput(
                f"consumer {consumer!r} cannot acknowledge epoch {epoch}: only epochs up to {sealed} are sealed"
            )
        raw = call.get(path)
        if raw is None:
            raise UnknownConsumer(f"consumer {consumer!r} of {ctx.pipeline!r} is not registered")
        node = ConsumerNode.from_bytes(raw.data, path=path)
        if node.acked >= epoch:
            return ConsumerState(consumer, node.acked)
        failure = call.try_commit([SetData(path, replace(node, acked=epoch).to_bytes(), raw.stat.version)])
        if failure is not None:
            if isinstance(failure.error, (BadVersionError, NoNodeError)):
                raise Conflict()
            raise failure.error
        return ConsumerState(consumer, epoch)

    # No find: the body itself reads the acknowledgement first, and a repeat is a no-op.
    return ctx.call(body, what=f"acknowledge epoch {epoch} for {consumer!r}")


def _unregister(ctx: PipelineContext, consumer: str, request_id: str | None) -> bool:
    path = ctx.paths.consumer(validate_name("consumer", consumer))

    def body(call: Call) -> bool:
        raw = call.get(path)
        if raw is None:
            return False
        failure = call.try_commit([
            Delete(path, raw.stat.version),
            *ctx.request_op(call, "unregister_consumer", True),
            *ctx.event(ConsumerUnregistered(consumer=consumer)),
        ])
        if failure is not None:
            if isinstance(failure.error, (BadVersionError, NoNodeError)):
                raise Conflict()
            raise failure.error
        return True

    def find(call: Call) -> bool | None:
        return True if call.exists(ctx.paths.request(call.request_id)) is not None else None

    return ctx.call(body, what=f"unregister consumer {consumer!r}", request_id=request_id, find=find)


class Consumer:
    """One consumer of a pipeline, for backpressure (``ledger.consumer(name)``).

    :param ctx: the pipeline the consumer reads.
    :param name: the consumer's name (validated).
    """

    def __init__(self, ctx: PipelineContext, name: str) -> None:
        self.ctx = ctx
        self.name = validate_name("consumer", name)

    def register(self, *, acked: int | None = None, request_id: str | None = None) -> ConsumerState:
        """Register the consumer (idempotent). A new consumer starts at the current frontier unless
        told otherwise, so registering never blocks epochs that are already allowed."""
        return _register(self.ctx, self.name, acked, request_id)

    def acknowledge(self, epoch: int) -> ConsumerState:
        """Record that the consumer has processed everything up to ``epoch`` (monotone: never moves
        back, so repeating it, after a lost answer or not, changes nothing)."""
        return _acknowledge(self.ctx, self.name, epoch)

    def unregister(self, *, request_id: str | None = None) -> bool:
        """Remove the consumer; returns whether it was registered (true even after a lost answer)."""
        return _unregister(self.ctx, self.name, request_id)


class Backpressure:
    """The consumers that hold a pipeline's producers back (``ledger.backpressure()``)."""

    def __init__(self, ctx: PipelineContext) -> None:
        self.ctx = ctx

    def consumers(self) -> list[ConsumerState]:
        """Every registered consumer with its acknowledged epoch."""
        acks = self.ctx.call(lambda c: consumer_acks(c, self.ctx), what="read consumers")
        return [ConsumerState(name, acked) for name, (acked, _) in acks.items()]

