"""Backpressure: consumers acknowledge epochs; a producer does not open epoch e while
e > (slowest registered consumer's acknowledged epoch) + the pipeline's window."""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.errors import InvalidInput, StateError
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.names import validate_name


class UnknownConsumer(StateError):
    """The consumer is not registered."""


@dataclass(frozen=True)
class ConsumerState:
    consumer: str
    acked: int


def _path(ledger: EpochLedger, consumer: str) -> str:
    return f"{ledger.paths.consumers}/{validate_name('consumer', consumer)}"


def register_consumer(ledger: EpochLedger, consumer: str, *, acked: int | None = None) -> ConsumerState:
    """Register ``consumer`` (idempotent). A new consumer starts at the current frontier unless told
    otherwise, so registering never blocks epochs that are already allowed."""
    path = _path(ledger, consumer)
    if acked is not None and (isinstance(acked, bool) or not isinstance(acked, int) or acked < 0):
        raise InvalidInput(f"acked must be a non-negative integer, not {acked!r}")

    def run() -> ConsumerState:
        existing = ledger.session.get(path)
        if existing is not None:
            return ConsumerState(consumer, int(payloads.decode("consumer", existing[0], path=path)["acked"]))
        start = ledger.frontier() if acked is None else acked
        ledger.client.ensure_path(ledger.paths.consumers)
        try:
            ledger.client.create(path, payloads.encode("consumer", {"acked": start, "registered_at": ledger._clock()}))
        except NodeExistsError:
            return run()
        ledger.record("consumer_registered", consumer=consumer, acked=start)
        return ConsumerState(consumer, start)

    return ledger._call(run, what=f"register consumer {consumer!r}")


def acknowledge(ledger: EpochLedger, consumer: str, epoch: int) -> ConsumerState:
    """Record that ``consumer`` has processed everything up to ``epoch`` (monotone: never moves back)."""
    path = _path(ledger, consumer)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise InvalidInput(f"acknowledged epoch must be a non-negative integer, not {epoch!r}")

    def run() -> ConsumerState:
        frontier = ledger.frontier()
        if epoch > frontier:
            raise InvalidInput(
                f"consumer {consumer!r} cannot acknowledge epoch {epoch}: only epochs up to {frontier} are sealed"
            )
        while True:
            raw = ledger.session.get(path)
            if raw is None:
                raise UnknownConsumer(f"consumer {consumer!r} of {ledger.pipeline!r} is not registered")
            doc = payloads.decode("consumer", raw[0], path=path)
            if doc["acked"] >= epoch:
                return ConsumerState(consumer, int(doc["acked"]))
            try:
                ledger.client.set(path, payloads.encode("consumer", {**payloads.body(doc), "acked": epoch}),
                                  version=raw[1].version)
            except BadVersionError:
                continue
            return ConsumerState(consumer, epoch)

    return ledger._call(run, what=f"acknowledge epoch {epoch} for {consumer!r}")


def unregister_consumer(ledger: EpochLedger, consumer: str) -> bool:
    """Remove a consumer that leaves; returns whether it was registered."""
    path = _path(ledger, consumer)

    def run() -> bool:
        try:
            ledger.client.delete(path)
        except NoNodeError:
            return False
        ledger.record("consumer_unregistered", consumer=consumer)
        return True

    return ledger._call(run, what=f"unregister consumer {consumer!r}")


def consumers(ledger: EpochLedger) -> list[ConsumerState]:
    """Every registered consumer with its acknowledged epoch."""
    return [ConsumerState(name, acked) for name, (acked, _) in ledger._consumer_acks().items()]
