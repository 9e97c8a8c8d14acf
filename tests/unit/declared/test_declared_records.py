"""The declared producers' staged records: versioned now, and what older versions staged still reads."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.coordination import CorruptPayload
from airflow_epochs.coordination.declared.records import StagedKey, StagedVote

TI = {"dag_id": "orders", "run_id": "r1", "task_id": "load", "map_index": -1}


def test_a_staged_vote_round_trips_as_a_versioned_payload():
    vote = StagedVote(TI, "2026-11-01", "ti-abc")
    raw = vote.to_bytes()
    assert json.loads(raw)["kind"] == "staged_vote"
    assert StagedVote.from_bytes(raw, path="/p") == vote
    assert StagedKey.from_bytes(StagedKey("2026-11-01").to_bytes(), path="/p") == StagedKey("2026-11-01")


def test_records_staged_before_they_were_versioned_still_read():
    legacy = json.dumps({"ti": TI, "partition_key": "2026-11-01", "request": "ti-abc"}).encode()
    assert StagedVote.from_bytes(legacy, path="/p") == StagedVote(TI, "2026-11-01", "ti-abc")
    assert StagedKey.from_bytes(b'{"partition_key":"k"}', path="/p").partition_key == "k"


@pytest.mark.parametrize("raw", [b"not json", b"[1]", b'{"ti": {}, "partition_key": 3, "request": "x"}',
                                 b'{"schema": 2, "kind": "staged_key", "partition_key": "k"}',
                                 b"[" * 200 + b"]" * 200])
def test_a_bad_staged_vote_is_corrupt_in_one_line(raw):
    with pytest.raises(CorruptPayload, match="/p"):
        StagedVote.from_bytes(raw, path="/p")
