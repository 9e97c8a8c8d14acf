"""The re-seal records (wire/versions.py): read back as written, refused when forged, and the lineage
key that names a partition of the same pipeline."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.coordination import CorruptPayload, InvalidName
from airflow_epochs.coordination.recipes.corrections.records import (
    CorrectionNode,
    SealedVersion,
    VersionEntry,
    VersionsNode,
    VersionVote,
    correction_id,
    partition_read,
    read_key,
)

VOTE = VersionVote("w", {"value": 87}, {"total": 3}, {"nyc:weather": 8}, "req", 1.5)


def test_versions_node_round_trip_and_its_views():
    node = VersionsNode(8, "weather", (VersionEntry(2, "sealed", "r", "late", "c", 1.0, 2.0),
                                       VersionEntry(3, "open", "", "stale", "d", 3.0)), {"w": VOTE})
    back = VersionsNode.from_bytes(node.to_bytes(), path="/x")
    assert back == node
    assert back.latest == 2 and back.open is not None and back.open.version == 3 and back.next_version == 4
    assert VersionsNode(8, "weather").latest == 1 and VersionsNode(8, "weather").next_version == 2


def test_sealed_version_and_correction_round_trip():
    doc = SealedVersion(8, "totals", 2, "", "stale", "c", 1.0, 2.0,
                        {"w": VOTE, "u": VersionVote("u", {}, None, {"nyc:weather": 9, "up": 3}, "q", 2.0)}, 77)
    assert SealedVersion.from_bytes(doc.to_bytes(), 77, path="/v") == doc
    assert doc.upstream == {"nyc:weather": 9, "up": 3}
    node = CorrectionNode(correction_id(8, "weather", 2), (8, "weather", 2), "r", "late", "marking",
                          ((8, "joined"), (9, "totals")), 1.0)
    assert CorrectionNode.from_bytes(node.to_bytes(), path="/c") == node
    assert node.id == "0000000008:weather:v2"


def test_forged_records_are_refused():
    raw = json.loads(VersionsNode(8, "w", (VersionEntry(2, "sealed", "r", "", "c", 1.0, 2.0),)).to_bytes())
    raw["versions"] = [[2, "exploded", "r", "", "c", 1.0, 2.0]]
    with pytest.raises(CorruptPayload, match="version entry is malformed"):
        VersionsNode.from_bytes(json.dumps(raw).encode(), path="/x")
    raw = json.loads(CorrectionNode("c", (8, "w", 2), "r", "", "planning").to_bytes())
    raw["state"] = "whatever"
    with pytest.raises(CorruptPayload, match="malformed correction"):
        CorrectionNode.from_bytes(json.dumps(raw).encode(), path="/c")


def test_read_key_names_a_partition_of_the_pipeline():
    assert read_key("nyc", "date:2013-01-01") == "nyc:date:2013-01-01"
    assert partition_read("nyc", "nyc:date:2013-01-01") == "date:2013-01-01"
    assert partition_read("nyc", "flights_raw") is None and partition_read("nyc", "nyc:") is None
    with pytest.raises(InvalidName):
        read_key("nyc", "a/b")
