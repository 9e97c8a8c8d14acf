"""Consumers and backpressure (one family): :mod:`.consumers` (register, acknowledge, unregister; the
slowest consumer as it holds producers back), :mod:`.records` (a registration's stored result) and
``watch`` (the asynchronous wait until every consumer caught up). The opening's own check of the
window reads the consumers' nodes through the kernel (``wire.nodes.ConsumerNode``)."""

from airflow_epochs.coordination.recipes.backpressure.consumers import (
    Backpressure,
    Consumer,
    ConsumerState,
    TooManyConsumers,
    UnknownConsumer,
)

__all__ = ["Backpressure", "Consumer", "ConsumerState", "TooManyConsumers", "UnknownConsumer"]
