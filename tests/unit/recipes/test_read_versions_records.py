"""The versions a vote read (``read_versions``, issue 47 item 6) in every record that keeps them: the
vote znode (compact and object form), a seal's sole and folded votes, the seal itself and a re-seal's
votes. Records written before the field read as naming none (a correction then judges them by when
they read, as before); a forged value is refused with the record's own error naming the field."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.recipes.corrections.records import SealedVersion, VersionsNode, VersionVote
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.vote_records import CastVote, FoldedVotes, SealNode, union_read_versions

PATH = "/airflow-epochs/nyc/epochs/0000000021/a-0000000001/totals/t"
UP = {"nyc:totals": 20, "nyc:joined": 21, "weather_raw": 5}
READS = {"nyc:totals": 2, "nyc:joined": 1}


def vote(producer: str = "t", upstream: dict[str, int] = UP, reads: dict[str, int] = READS) -> CastVote:
    return CastVote(producer, 1, {"rows": 7}, "0f" * 16, 1795487924.5, {"total": 3}, upstream, reads)


def seal(votes: dict[str, CastVote], *, sole: bool) -> SealNode:
    upstream = {k: max(v.upstream.get(k, 0) for v in votes.values()) for v in votes.values() for k in v.upstream}
    return SealNode("totals", 1, 1, 2.0, "r", 1, len(votes), (0,), upstream, 1.5, FoldedVotes(1, votes), sole,
                    union_read_versions(votes.values(), upstream))


def test_a_vote_naming_its_versions_reads_back_in_every_form():
    cast = vote()
    assert CastVote.from_znode(cast.znode_bytes(), PATH, "t", 1) == cast
    object_form = payloads.encode("vote", {"producer": "t", "attempt": 1, **cast.folded_body()})
    assert CastVote.from_znode(object_form, PATH, "t", 1) == cast
    for node in (seal({"t": cast}, sole=True), seal({"t": cast, "u": vote("u")}, sole=False)):
        back = SealNode.from_bytes(node.to_bytes(), path=PATH)
        assert back == node and dict(back.read_versions) == READS
        assert back.votes is not None and back.votes.votes["t"] == cast


def test_records_written_before_read_versions_read_as_naming_none():
    old_row = b'[2,"vote","r",1.5,{"rows":7},{"upstream":{"nyc:totals":20}}]'
    assert CastVote.from_znode(old_row, PATH, "t", 1).read_versions == {}
    old_seal = json.loads(seal({"t": vote(reads={})}, sole=True).to_bytes())
    assert "read_versions" not in old_seal and "read_versions" not in old_seal["vote"]
    assert SealNode.from_bytes(json.dumps(old_seal).encode(), path=PATH).read_versions == {}
    old_vote = VersionVote.from_json("t", {"manifest": {}, "snapshot": None, "upstream": {"nyc:totals": 20},
                                           "request": "q", "voted_at": 1.0}, "/v")
    assert old_vote.read_versions == {}


@pytest.mark.parametrize("bad", [
    {"nyc:totals": 0},  # versions start at 1
    {"nyc:totals": 1_000_001},  # beyond the largest version number
    {"nyc:totals": True},  # a boolean is not a version
    {"nyc:totals": "2"},
    {"nyc:totals": 2.0},
    {"nyc:flights": 1},  # a key upstream does not name
    ["nyc:totals"],
])
def test_a_forged_read_versions_is_refused_naming_it(bad):
    row = json.dumps([2, "vote", "r", 1.5, {}, {"upstream": UP, "read_versions": bad}]).encode()
    with pytest.raises(CorruptPayload, match=r"totals/t: read_versions is not a map"):
        CastVote.from_znode(row, PATH, "t", 1)
    doc = json.loads(seal({"t": vote()}, sole=True).to_bytes())
    doc["read_versions"] = bad
    with pytest.raises(CorruptPayload, match="read_versions"):
        SealNode.from_bytes(json.dumps(doc).encode(), path=PATH)
    doc = json.loads(seal({"t": vote()}, sole=True).to_bytes())
    doc["vote"]["read_versions"] = bad
    with pytest.raises(CorruptPayload, match="read_versions"):
        SealNode.from_bytes(json.dumps(doc).encode(), path=PATH)
    doc = json.loads(seal({"t": vote(), "u": vote("u")}, sole=False).to_bytes())
    doc["votes"]["u"]["read_versions"] = bad
    with pytest.raises(CorruptPayload, match="read_versions"):
        SealNode.from_bytes(json.dumps(doc).encode(), path=PATH)
    body = {"manifest": {}, "snapshot": None, "upstream": UP, "request": "q", "voted_at": 1.0, "read_versions": bad}
    with pytest.raises(CorruptPayload, match=r"/v: read_versions is not a map"):
        VersionVote.from_json("t", body, "/v")


def test_a_reseal_vote_keeps_its_versions_and_a_sealed_version_counts_the_oldest():
    a = VersionVote("a", {}, None, {"nyc:totals": 20}, "q", 1.0, {"nyc:totals": 2})
    b = VersionVote("b", {}, None, {"nyc:totals": 20}, "r", 1.0, {"nyc:totals": 3})
    node = VersionsNode(21, "totals", votes={"a": a, "b": b})
    assert VersionsNode.from_bytes(node.to_bytes(), path="/x") == node
    doc = SealedVersion(21, "totals", 2, "", "stale", "c", 1.0, 2.0, {"a": a, "b": b}, 77)
    assert SealedVersion.from_bytes(doc.to_bytes(), 77, path="/v") == doc
    assert doc.read_versions == {"nyc:totals": 2}


def test_union_read_versions_takes_the_oldest_of_the_epoch_read_and_drops_a_key_a_voter_left_out():
    newer = vote("a", {"nyc:totals": 20}, {"nyc:totals": 2})
    older = vote("b", {"nyc:totals": 20}, {"nyc:totals": 1})
    earlier_epoch = vote("c", {"nyc:totals": 19}, {})  # read another epoch: not the one the seal names
    silent = vote("d", {"nyc:totals": 20}, {})
    assert union_read_versions([newer, older, earlier_epoch], {"nyc:totals": 20}) == {"nyc:totals": 1}
    assert union_read_versions([newer, earlier_epoch], {"nyc:totals": 20}) == {"nyc:totals": 2}
    assert union_read_versions([newer, silent], {"nyc:totals": 20}) == {}
