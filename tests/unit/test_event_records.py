"""The history's event records: each kind written by the change and read back by attribute, a field an
older writer did not store read as its default, an unknown kind kept as stored, a wrong type refused."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from airflow_epochs.coordination import CorruptPayload, Event
from airflow_epochs.coordination.wire import events
from airflow_epochs.coordination.wire.events import (
    EVENT_KINDS,
    AttemptStarted,
    BarrierReleased,
    CorrectionDone,
    CorrectionPlanned,
    DeadlineMissed,
    DeliveryScopeRetired,
    EpochOpened,
    EventRecord,
    PartitionSealed,
    PipelineCreated,
    ProducerRerun,
    ResealOpened,
    Rollback,
    SealedLate,
    UnknownEvent,
    VersionSealed,
    event_record,
)

SAMPLES = [
    PipelineCreated(first_epoch=1, config={"partitions": {"a": ["x"]}}),
    EpochOpened(epoch=3, attempt=7, owner="o", config_version=2, generation=1),
    AttemptStarted(epoch=3, attempt=8, owner="p", superseded=7, previous_state="open", generation=1),
    PartitionSealed(epoch=3, partition="a", attempt=8, producer_count=2, first_vote_at=1.5, generation=1),
    BarrierReleased(epoch=3, barrier="join", decision="quorum", late=("b", "c"), late_count=5, arrived=3),
    Rollback(to_epoch=2, from_frontier=3, epochs={"3": {"state": "sealed", "attempt": 8, "generation": 1}},
             reason="bad data", owner="o", request="rb-1"),
    DeliveryScopeRetired(scope="gone", cursors={"a": 2}),
    ResealOpened(epoch=8, partition="weather", version=2, correction="0000000008:weather:v2", reason="late",
                 request="r"),
    VersionSealed(epoch=8, partition="weather", version=2, correction="0000000008:weather:v2"),
    CorrectionPlanned(epoch=8, correction="0000000008:weather:v2", plan=("8:joined", "9:totals")),
    CorrectionDone(epoch=8, correction="0000000008:weather:v2", resealed=2),
    DeadlineMissed(epoch=4, partition="a", deadline_at=10.5, missing=("x", "y"), raised_by="w"),
    SealedLate(epoch=4, partition="a", deadline_at=10.5, sealed_at=12.0, late_by=1.5),
    ProducerRerun(epoch=3, partition="a", producer="x", key="2026-01-03", cleared=True, succeeded_try=1, try_number=2,
                  task_instance={"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1}, reopened=True),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: r.kind)
def test_a_record_reads_back_as_written_through_json(record):
    stored = json.loads(json.dumps(record.to_detail()))
    assert event_record(record.kind, stored) == record
    assert Event(1, 1, record.kind, 0.0, stored).record == record


def _record_classes() -> list[type[EventRecord]]:
    """Every record class the events module defines (the unknown kind's stand-in aside)."""
    return [cls for cls in vars(events).values() if isinstance(cls, type) and issubclass(cls, EventRecord)
            and cls not in (EventRecord, UnknownEvent)]


def test_every_kind_is_registered_once_under_its_own_name():
    classes = _record_classes()
    assert classes, "no record class found"
    assert all(kind == cls.kind and kind for kind, cls in EVENT_KINDS.items())
    assert sorted(EVENT_KINDS.values(), key=lambda c: c.__name__) == sorted(classes, key=lambda c: c.__name__), (
        "a record class not in EVENT_KINDS (or one registered that is not defined there)")
    kinds = [cls.kind for cls in classes]
    assert len(set(kinds)) == len(kinds), f"two classes share a kind: {sorted(kinds)}"


@pytest.mark.parametrize("cls", list(EVENT_KINDS.values()), ids=lambda c: c.kind)
def test_every_kind_stores_each_field_under_a_key_of_its_own(cls):
    keys = [cls.stored_as.get(f.name, f.name) for f in dataclasses.fields(cls)]
    assert len(set(keys)) == len(keys), keys
    assert set(cls.stored_as) <= {f.name for f in dataclasses.fields(cls)}


def _value(hint: Any, name: str) -> Any:
    """A value of type ``hint`` that is not a field's default (so a field dropped on the way shows)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    origin = typing.get_origin(hint)
    if hint is bool:
        return True
    if hint is int:
        return 7
    if hint is float:
        return 2.5
    if hint is str:
        return f"{name}-x"
    if origin is tuple:
        return ("a", "b")
    if origin is Mapping:
        return {"k": 1}
    raise AssertionError(f"no sample value for field {name!r} of type {hint!r}: teach _value about it")


@pytest.mark.parametrize("cls", list(EVENT_KINDS.values()), ids=lambda c: c.kind)
def test_every_kind_round_trips_with_every_field_set(cls):
    hints = typing.get_type_hints(cls)
    record = cls(**{f.name: _value(hints[f.name], f.name) for f in dataclasses.fields(cls)})
    stored = json.loads(json.dumps(record.to_detail()))
    assert event_record(cls.kind, stored) == record
    assert Event(1, 1, cls.kind, 0.0, stored).record == record


def test_the_seal_count_is_stored_under_the_key_the_seal_uses():
    detail = PartitionSealed(epoch=1, partition="a", producer_count=3).to_detail()
    assert detail["producers"] == 3 and "producer_count" not in detail


def test_a_field_an_older_writer_did_not_store_reads_as_its_default():
    assert event_record("epoch_opened", {"epoch": 4}) == EpochOpened(epoch=4)


def test_a_flag_is_a_json_boolean_only():
    with pytest.raises(CorruptPayload, match="'cleared'"):
        event_record("producer_rerun", {"epoch": 1, "cleared": 1})


def test_an_epoch_event_without_its_epoch_is_refused():
    with pytest.raises(CorruptPayload, match="epoch"):
        event_record("epoch_opened", {"attempt": 1})


def test_a_field_of_the_wrong_type_is_refused_naming_it():
    with pytest.raises(CorruptPayload, match="'attempt'"):
        event_record("epoch_opened", {"epoch": 4, "attempt": "seven"})
    with pytest.raises(CorruptPayload, match="'late'"):
        event_record("barrier_released", {"epoch": 4, "late": "b"})


def test_a_kind_this_version_does_not_know_is_kept_as_stored():
    record = event_record("future_thing", {"x": 1})
    assert record == UnknownEvent("future_thing", {"x": 1}) and record.epoch is None


def test_a_pipeline_wide_event_is_about_no_epoch():
    assert PipelineCreated().epoch is None and EpochOpened(epoch=2).epoch == 2
