"""The compaction summary's record of each partition's newest compacted snapshot: round trip, a summary
written before the field existed, and a malformed entry refused naming it."""

from __future__ import annotations

import json
import re

import pytest

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire.compaction_record import CompactionSummary
from airflow_epochs.coordination.wire.nodes import SnapshotPlace


def test_the_newest_compacted_snapshots_round_trip_in_a_short_form():
    summary = CompactionSummary(9, 9, 120, snapshots={"totals": SnapshotPlace(2, 1, 3)}, snapshots_from=0)
    raw = summary.to_bytes()
    assert json.loads(raw)["snapshots"] == {"totals": [2, 1, 3]}
    assert CompactionSummary.from_bytes(raw, path="/p/archive") == summary


def test_a_summary_written_before_snapshots_were_recorded_knows_nothing_up_to_its_compaction_point():
    doc = json.loads(CompactionSummary(7, 7, 50).to_bytes())
    del doc["snapshots"], doc["snapshots_from"]
    old = CompactionSummary.from_bytes(json.dumps(doc).encode(), path="/p/archive")
    assert (old.snapshots, old.snapshots_from) == ({}, 7)


@pytest.mark.parametrize("entry", [{"epoch": 2, "generation": 1, "attempt": 3}, [2, 1], [2, True, 3], "2"])
def test_a_malformed_snapshot_entry_is_refused_naming_it(entry):
    doc = json.loads(CompactionSummary(7, 7, 50).to_bytes())
    doc["snapshots"] = {"totals": entry}
    with pytest.raises(CorruptPayload, match=r"/p/archive: a compacted snapshot place .*" + re.escape(repr(entry))):
        CompactionSummary.from_bytes(json.dumps(doc).encode(), path="/p/archive")
