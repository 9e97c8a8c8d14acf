"""The znodes of partition deadlines: declared deadlines, the producers' seal statistics, and the one
late alert of a late (epoch, partition) with the ephemeral mark of the watcher delivering it."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths, epoch_key


@dataclass(frozen=True)
class DeadlinePaths:
    """Paths of one pipeline's deadline records, below the folders :class:`PipelinePaths` names."""

    paths: PipelinePaths

    def seal_stats(self, partition: str) -> str:
        """Recent seal times of the partition's producers."""
        return f"{self.paths.seal_stats_dir}/{validate_name('partition', partition)}"

    def deadline(self, partition: str, declarer: str) -> str:
        """A deadline of the partition declared by ``declarer`` (the pipeline or a consumer)."""
        return f"{self.paths.deadlines}/{validate_name('partition', partition)},{validate_name('owner', declarer)}"

    def late_alert(self, epoch: int, generation: int, partition: str) -> str:
        """The one alert of a late (epoch, partition) in one opening of the epoch, across watchers and
        deployments (create-only)."""
        return (f"{self.paths.late_alerts}/{epoch_key(validate_epoch(epoch))},{int(generation)},"
                f"{validate_name('partition', partition)}")

    def late_alert_delivery(self, epoch: int, generation: int, partition: str) -> str:
        """Ephemeral: the watcher running the alert's callback right now."""
        return f"{self.late_alert(epoch, generation, partition)},run"
