"""Backpressure: consumers acknowledge epochs; a producer does not open epoch e while
e > (slowest registered consumer's acknowledged epoch) + the pipeline's window.

Each consumer is one znode. Registration is create-only (with its request id, and its history
record in the same transaction), acknowledgement is a monotone compare-and-set (repeating it changes
nothing), and unregistration stores its outcome under ``requests/<id>``, so every answer stays true
when ZooKeeper's reply is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination.errors import InvalidInput, StateError
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.names import validate_name
from airflow_epochs.coordination.reader import consumer_acks, frontier
from airflow_epochs.coordination.records import Overtaken
from airflow_epochs.coordination.session import Call, Conflict
from airflow_epochs.coordination.steps import Create, Delete, SetData
from airflow_epochs.coordination.wire import ConsumerNode


class UnknownConsumer(StateError):
    """The consumer is not registered."""


@dataclass(frozen=True)
class ConsumerState:
    """A consumer and the epoch it acknowledged; ``overtaken`` is set when a repeated registration
    finds it committed and the consumer unregistered since."""

    consumer: str
    acked: int
    overtaken: Overtaken | None = field(default=None, compare=False)


def register_consumer(
    ledger: EpochLedger, consumer: str, *, acked: int | None = None, request_id: str | None = None
) -> ConsumerState:
    """Register ``consumer`` (idempotent). A new consumer starts at the current frontier unless told
    otherwise, so registering never blocks epochs that are already allowed."""
    ctx = ledger.ctx
    path = ctx.paths.consumer(validate_name("consumer", consumer))
    if acked is not None and (isinstance(acked, bool) or not isinstance(acked, int) or acked < 0):
        raise InvalidInput(f"acked must be a non-negative integer, not {acked!r}")

    def body(call: Call) -> ConsumerState:
        existing = call.get(path)
        if existing is not None:
            return ConsumerState(consumer, ConsumerNode.from_bytes(existing[0], path=path).acked)
        start = frontier(call, ctx) if acked is None else acked
        failure = call.try_commit([
            Create(path, ConsumerNode(start, ctx.clock(), call.request_id).to_bytes()),
            # findable after the consumer is gone again (unregistered by someone else)
            ctx.request_op(call, "register_consumer", {"consumer": consumer, "acked": start}),
            *ctx.event("consumer_registered", consumer=consumer, acked=start),
        ])
        if failure is not None:
            if isinstance(failure.error, NodeExistsError):
                raise Conflict()  # registered meanwhile: report what is there
            raise failure.error
        return ConsumerState(consumer, start)

    def find(call: Call) -> ConsumerState | None:
        raw = call.get(path)
        if raw is not None:
            node = ConsumerNode.from_bytes(raw[0], path=path)
            if node.request == call.request_id:
                return ConsumerState(consumer, node.acked)
        stored = ctx.stored_result(call)
        if stored is None:
            return None
        return ConsumerState(consumer, int(stored["acked"]), overtaken=Overtaken("unregistered"))

    return ctx.call(body, what=f"register consumer {consumer!r}", request_id=request_id, find=find)


def acknowledge(ledger: EpochLedger, consumer: str, epoch: int) -> ConsumerState:
    """Record that ``consumer`` has processed everything up to ``epoch`` (monotone: never moves back,
    so repeating it, after a lost answer or not, changes nothing)."""
    ctx = ledger.ctx
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
            raise UnknownConsumer(f"consumer {consumer!r} of {ledger.pipeline!r} is not registered")
        node = ConsumerNode.from_bytes(raw[0], path=path)
        if node.acked >= epoch:
            return ConsumerState(consumer, node.acked)
        failure = call.try_commit([SetData(path, replace(node, acked=epoch).to_bytes(), raw[1].version)])
        if failure is not None:
            if isinstance(failure.error, (BadVersionError, NoNodeError)):
                raise Conflict()
            raise failure.error
        return ConsumerState(consumer, epoch)

    # No find: the body itself reads the acknowledgement first, and a repeat is a no-op.
    return ctx.call(body, what=f"acknowledge epoch {epoch} for {consumer!r}")


def unregister_consumer(ledger: EpochLedger, consumer: str, *, request_id: str | None = None) -> bool:
    """Remove a consumer that leaves; returns whether it was registered (true even after a lost answer)."""
    ctx = ledger.ctx
    path = ctx.paths.consumer(validate_name("consumer", consumer))

    def body(call: Call) -> bool:
        raw = call.get(path)
        if raw is None:
            return False
        failure = call.try_commit([
            Delete(path, raw[1].version),
            ctx.request_op(call, "unregister_consumer", True),
            *ctx.event("consumer_unregistered", consumer=consumer),
        ])
        if failure is not None:
            if isinstance(failure.error, (BadVersionError, NoNodeError)):
                raise Conflict()
            raise failure.error
        return True

    def find(call: Call) -> bool | None:
        return True if call.exists(ctx.paths.request(call.request_id)) is not None else None

    return ctx.call(body, what=f"unregister consumer {consumer!r}", request_id=request_id, find=find)


def consumers(ledger: EpochLedger) -> list[ConsumerState]:
    """Every registered consumer with its acknowledged epoch."""
    acks = ledger.ctx.call(lambda c: consumer_acks(c, ledger.ctx), what="read consumers")
    return [ConsumerState(name, acked) for name, (acked, _) in acks.items()]
