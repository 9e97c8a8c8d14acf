"""The znodes of asset delivery: one folder per delivery scope, holding a cursor per partition, the
ephemeral claims of the seals being delivered, and the records of delivered re-sealed versions.

::

    asset-events/<scope>/next-<partition>            the next epoch of the partition to deliver
    asset-events/<scope>/<epoch>-<gen>-<partition>   ephemeral: the deliverer of that seal
    asset-events/<scope>/<claim>,v<version>          ephemeral: the deliverer of a re-sealed version
    asset-events/<scope>/<claim>,v<version>,sent     persistent: Airflow stored that version's event
    delivery-rewinds                                 the rollbacks, counted (each moves cursors back)
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths, epoch_key

_CURSOR_PREFIX = "next-"
_SENT_SUFFIX = ",sent"


def cursor_partition(name: str) -> str | None:
    """The partition a delivery scope's child ``name`` is the cursor of, or None (a claim)."""
    return name[len(_CURSOR_PREFIX):] if name.startswith(_CURSOR_PREFIX) else None


def is_sent_marker(name: str) -> bool:
    """Whether a delivery scope's child ``name`` records a delivered re-sealed version (not a claim)."""
    return name.endswith(_SENT_SUFFIX)


@dataclass(frozen=True)
class DeliveryPaths:
    """Paths of one pipeline's delivery scopes, below the folder :class:`PipelinePaths` names."""

    paths: PipelinePaths

    @property
    def rewinds(self) -> str:
        """The pipeline's rollbacks as delivery counts them (written by each rollback)."""
        return f"{self.paths.base}/delivery-rewinds"

    def scope(self, scope: str) -> str:
        return f"{self.paths.asset_events}/{validate_name('owner', scope)}"

    def claim(self, scope: str, epoch: int, generation: int, partition: str) -> str:
        """Claim on emitting one seal's asset event: one per (epoch, generation, partition) and scope."""
        return (f"{self.scope(scope)}/{epoch_key(validate_epoch(epoch))}-{generation}-"
                f"{validate_name('partition', partition)}")

    def version_claim(self, scope: str, epoch: int, generation: int, partition: str, version: int) -> str:
        """Claim on emitting the asset event of re-sealed ``version`` (>= 2) of a seal (ephemeral, as
        :meth:`claim`; a comma, which no name holds, keeps it apart from any seal's claim)."""
        return f"{self.claim(scope, epoch, generation, partition)},v{version:010d}"

    def version_sent(self, scope: str, epoch: int, generation: int, partition: str, version: int) -> str:
        """Persistent: Airflow stored the asset event of re-sealed ``version`` (see :meth:`version_claim`)."""
        return self.version_claim(scope, epoch, generation, partition, version) + _SENT_SUFFIX

    def cursor(self, scope: str, partition: str) -> str:
        """The next epoch of ``partition`` whose seal has not been persisted as an asset event yet."""
        return f"{self.scope(scope)}/{_CURSOR_PREFIX}{validate_name('partition', partition)}"
