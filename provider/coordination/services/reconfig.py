"""Reconfiguration at epoch boundaries: a key-to-bucket map whose changes are timestamped data.

A key goes to bucket ``bucket_of(key, n)``; the configuration's ``buckets[b]`` names the worker that
owns bucket b. Moving buckets between workers is a configuration change that names the epoch it
starts at (Megaphone's idea), either all at once or fluidly (a few buckets per epoch), so every
epoch runs under exactly one map and state moves at epoch boundaries only.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_epochs.coordination.base.errors import InvalidConfig, InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.wire.config import ConfigVersion


def bucket_of(key: str | bytes, buckets: int) -> int:
    """The bucket of ``key``: a stable hash (CRC-32, the same in every process) modulo ``buckets``."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise InvalidInput(f"the number of buckets must be a positive integer, not {buckets!r}")
    raw = key.encode() if isinstance(key, str) else key
    return zlib.crc32(raw) % buckets


def plan_migration(
    current: Sequence[str], target: Sequence[str], *, per_epoch: int | None = None
) -> list[tuple[str, ...]]:
    """The bucket maps to apply one epoch after another to go from ``current`` to ``target``.

    :param per_epoch: None moves everything at once (one step); k moves at most k buckets per epoch,
        lowest bucket numbers first (fluid migration).
    """
    if len(current) != len(target):
        raise InvalidConfig(f"a migration keeps the number of buckets: {len(current)} -> {len(target)}")
    if per_epoch is not None and (isinstance(per_epoch, bool) or not isinstance(per_epoch, int) or per_epoch < 1):
        raise InvalidInput(f"per_epoch must be a positive integer or None, not {per_epoch!r}")
    moving = [b for b, (old, new) in enumerate(zip(current, target, strict=True)) if old != new]
    if not moving:
        return []
    step = len(moving) if per_epoch is None else per_epoch
    maps: list[tuple[str, ...]] = []
    state = list(current)
    for start in range(0, len(moving), step):
        for bucket in moving[start:start + step]:
            state[bucket] = target[bucket]
        maps.append(tuple(state))
    return maps


def schedule_migration(
    ledger: EpochLedger, target: Sequence[str], *, from_epoch: int, per_epoch: int | None = None
) -> list[ConfigVersion]:
    """Schedule the bucket map ``target``, starting at ``from_epoch``, in one transaction.

    Step i of the plan applies from ``from_epoch + i``; everything else in the configuration stays as
    it is in force at ``from_epoch``.
    """
    validate_epoch(from_epoch, what="from_epoch")
    for worker in target:
        validate_name("producer", worker)
    base = ledger.config_for(from_epoch).config
    if not base.buckets:
        raise InvalidConfig(f"pipeline {ledger.pipeline!r} has no bucket map at epoch {from_epoch} to migrate")
    steps = plan_migration(base.buckets, tuple(target), per_epoch=per_epoch)
    if not steps:
        return []
    return ledger.set_configs([(base.replace(buckets=m), from_epoch + i) for i, m in enumerate(steps)])


@dataclass(frozen=True)
class BucketAssignment:
    """What one worker owns at one epoch, and what moved since the epoch before."""

    epoch: int
    worker: str
    config_version: int
    owned: frozenset[int]
    moved_in: frozenset[int]  # owned now, owned by someone else at epoch - 1: load their state
    moved_out: frozenset[int]  # owned at epoch - 1, not now: hand the state over

    def owns(self, key: str | bytes, buckets: int) -> bool:
        return bucket_of(key, buckets) in self.owned


def assignment(ledger: EpochLedger, epoch: int, worker: str) -> BucketAssignment:
    """The buckets ``worker`` owns at ``epoch`` and which of them moved since ``epoch - 1``."""
    validate_epoch(epoch)
    validate_name("producer", worker)
    now = ledger.config_for(epoch)
    owned = frozenset(b for b, w in enumerate(now.config.buckets) if w == worker)
    before: frozenset[int] = owned
    if epoch > 1:
        try:
            previous = ledger.config_for(epoch - 1).config.buckets
        except Exception:  # noqa: BLE001 - no configuration before the first epoch: nothing moved
            previous = now.config.buckets
        before = frozenset(b for b, w in enumerate(previous) if w == worker)
    return BucketAssignment(epoch, worker, now.version, owned, owned - before, before - owned)
