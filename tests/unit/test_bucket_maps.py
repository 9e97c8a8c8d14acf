"""Key-to-bucket maps of reconfiguration, without a server: a key's bucket is stable, and a migration
plan moves all at once or fluidly."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import (
    InvalidConfig,
    InvalidInput,
    bucket_of,
    plan_migration,
)


def test_bucket_of_is_stable():
    assert bucket_of("JFK", 16) == bucket_of(b"JFK", 16) == bucket_of("JFK", 16)
    assert {bucket_of(f"k{i}", 16) for i in range(500)} == set(range(16))
    with pytest.raises(InvalidInput):
        bucket_of("x", 0)


def test_plan_migration_all_at_once_and_fluid():
    old = ("w1",) * 4 + ("w2",) * 4
    new = ("w1", "w2") * 4
    assert plan_migration(old, new) == [new]
    steps = plan_migration(old, new, per_epoch=1)
    assert len(steps) == 4 and steps[-1] == new
    with pytest.raises(InvalidConfig):
        plan_migration(old, new[:-1])


