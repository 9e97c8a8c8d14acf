"""The vote znode's compact form: what is written reads back the same, a vote written in the older
object form still reads, and a compact vote that does not fit is refused, never misread."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.vote_records import CastVote

PATH = "/airflow-epochs/p/epochs/0000000001/a-0000000001/part0/prod0"


@pytest.mark.parametrize("snapshot, upstream", [(None, {}), ("s3://state/1", {}), (None, {"up": 3}),
                                                 ({"path": "s3://x"}, {"up": 3})])
def test_a_compact_vote_reads_back_as_written(snapshot, upstream):
    vote = CastVote("prod0", 1, {"rows": 7}, "0f" * 16, 1795487924.3701358, snapshot, upstream)
    raw = vote.znode_bytes()
    assert raw.startswith(b'[2,"vote",')
    assert CastVote.from_znode(raw, PATH, "prod0", 1) == vote
    old_form = payloads.encode("vote", {"producer": "prod0", "attempt": 1, **vote.folded_body()})
    assert len(raw) < len(old_form) - 40  # most of what a fleet keeps mid-epoch is vote znodes
    assert CastVote.from_znode(old_form, PATH, "prod0", 1) == vote  # the object form still reads


@pytest.mark.parametrize("raw", [
    b'[2,"vote","r",1.5]',  # no manifest
    b'[2,"vote","r",true,{}]',  # a boolean time
    b'[2,"vote",7,1.5,{}]',  # a request id that is not a string
    b'[2,"vote","r",1.5,[]]',  # a manifest that is not an object
    b'[2,"vote","r",1.5,{},{"owner":"x"}]',  # an extra field no vote has
    b'[2,"vote","r",1.5,{},{"upstream":{"up":"3"}}]',  # an upstream epoch that is not a number
    b'[1,"vote","r",1.5,{}]',  # another schema
    b'[2,"seal","r",1.5,{}]',  # another kind
    b'[2]',
])
def test_a_compact_vote_that_does_not_fit_is_refused(raw):
    with pytest.raises(CorruptPayload, match="part0/prod0"):
        CastVote.from_znode(raw, PATH, "prod0", 1)
