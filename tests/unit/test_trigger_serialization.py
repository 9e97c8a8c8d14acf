"""Triggers serialise to their package path and primitives only (what a triggerer can load)."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.triggers.assets import SealedPartitionEventTrigger
from airflow_epochs.triggers.backpressure import ConsumersCaughtUpTrigger
from airflow_epochs.triggers.barriers import BarrierReleasedTrigger
from airflow_epochs.triggers.frontier import FrontierReachedTrigger
from airflow_epochs.triggers.seals import PartitionsSealedTrigger

TRIGGERS = [
    FrontierReachedTrigger(pipeline="p", epoch=3, give_up_after=5.0),
    PartitionsSealedTrigger(pipeline="p", epoch=3, partitions=["a", "b"]),
    BarrierReleasedTrigger(pipeline="p", epoch=3, barrier="ingested"),
    SealedPartitionEventTrigger(pipeline="p", partition="a", scope="deploy-a", from_epoch=2),
    ConsumersCaughtUpTrigger(pipeline="p", epoch=2, deadline=1_900_000_000.0),
]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: type(t).__name__)
def test_serialize_returns_package_path_and_primitives(trigger):
    path, kwargs = trigger.serialize()
    assert path.startswith("airflow_epochs.triggers.")
    assert path.endswith(type(trigger).__name__)
    assert json.loads(json.dumps(kwargs)) == kwargs
    module, _, name = path.rpartition(".")
    clone = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert clone.serialize() == (path, kwargs)


