"""PipelineReader: each read of :mod:`.reader` and :mod:`.snapshots` in a call of its own (its own
deadline), for status pages, sensors, triggers and the UI."""

from __future__ import annotations

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.state.history import latest_event
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.state.reader import (
    consumer_acks,
    epoch_info,
    frontier,
    history,
    seal_info,
    seal_record,
    vote_of,
)
from airflow_epochs.coordination.state.snapshots import last_sealed_snapshots
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.coordination.wire.records import (
    EpochInfo,
    Event,
    SealInfo,
    SealRecord,
    SnapshotRef,
    VoteRecord,
)


class PipelineReader:
    """Read-only view of one pipeline; every method is one call with its own deadline.

    :param ctx: the pipeline (its client, paths and deadline).
    """

    def __init__(self, ctx: PipelineContext) -> None:
        self.ctx = ctx

    def frontier(self) -> int:
        """The highest epoch such that it and every earlier epoch are sealed."""
        return self.ctx.call(lambda c: frontier(c, self.ctx), what="read frontier")

    def newest_epoch(self) -> int:
        """The newest epoch opened (and not rolled back); ``first_epoch - 1`` if none."""
        return self.ctx.call(lambda c: self.ctx.record(c).newest_epoch, what="read pipeline")

    def config_versions(self) -> list[ConfigVersion]:
        """Every configuration version, oldest first."""

        def run(call: Call) -> list[ConfigVersion]:
            record = self.ctx.record(call)
            return [self.ctx.config(call, version) for version, _ in record.configs]

        return self.ctx.call(run, what="read config versions")

    def config_for(self, epoch: int) -> ConfigVersion:
        """The configuration version in force at ``epoch``: the newest one starting at or before it."""
        validate_epoch(epoch)
        return self.ctx.call(lambda c: self.ctx.config_for(c, epoch), what=f"read the configuration of epoch {epoch}")

    def epoch_info(self, epoch: int) -> EpochInfo | None:
        validate_epoch(epoch)
        return self.ctx.call(lambda c: epoch_info(c, self.ctx, epoch), what=f"read epoch {epoch}")

    def seal(self, epoch: int, partition: str) -> SealInfo | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda c: seal_info(c, self.ctx, epoch, partition),
                             what=f"read seal {partition!r} of epoch {epoch}")

    def seal_record(self, epoch: int, partition: str) -> SealRecord | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        return self.ctx.call(lambda c: seal_record(c, self.ctx, epoch, partition),
                             what=f"read seal {partition!r} of epoch {epoch}")

    def vote_of(self, epoch: int, partition: str, producer: str, attempt: int | None = None) -> VoteRecord | None:
        validate_epoch(epoch)
        validate_name("partition", partition)
        validate_name("producer", producer)
        return self.ctx.call(lambda c: vote_of(c, self.ctx, epoch, partition, producer, attempt),
                             what=f"read the vote of {producer!r} on {partition!r} at epoch {epoch}")

    def last_sealed_snapshots(self, partition: str, *, before_epoch: int | None = None) -> dict[str, SnapshotRef]:
        validate_name("partition", partition)
        if before_epoch is not None:
            validate_epoch(before_epoch, what="before_epoch")
        return self.ctx.call(lambda c: last_sealed_snapshots(c, self.ctx, partition, before_epoch),
                             what=f"find the last snapshots of {partition!r}")

    def history(self, *, since_seq: int = -1, limit: int | None = None) -> list[Event]:
        return self.ctx.call(lambda c: history(c, self.ctx, since_seq=since_seq, limit=limit), what="read history")

    def latest_event(self) -> Event | None:
        return self.ctx.call(lambda c: latest_event(c, self.ctx), what="read the latest event")

    def consumers(self) -> dict[str, int]:
        acks = self.ctx.call(lambda c: consumer_acks(c, self.ctx), what="read consumers")
        return {name: acked for name, (acked, _) in acks.items()}
