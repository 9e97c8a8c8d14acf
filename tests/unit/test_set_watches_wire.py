"""The re-arming client's SetWatches request, without a server: jute encoding, batches bounded by
size, and a bound below one refused."""

from __future__ import annotations

import pytest

from airflow_epochs.triggers.rearming_client import RearmingKazooClient, SetWatches, set_watches_batches


def test_set_watches_serialises_as_jute_and_batches_by_size():
    request = SetWatches(7, ["/a"], ["/bb"], [])
    assert bytes(request.serialize()) == (
        (7).to_bytes(8, "big") + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"/a"
        + (1).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"/bb" + (0).to_bytes(4, "big"))
    paths = [f"/pipelines/p/seal-{i:05d}" for i in range(2000)]
    batches = list(set_watches_batches(9, paths[:1000], paths[1000:], [], max_bytes=8 * 1024))
    assert all(len(b.serialize()) <= 8 * 1024 for b in batches)
    assert [p for b in batches for p in b.data_watches] == paths[:1000]
    assert [p for b in batches for p in b.exist_watches] == paths[1000:]
    assert len(batches) == 7 and all(b.relative_zxid == 9 for b in batches)


def test_rejects_a_bound_below_one():
    with pytest.raises(ValueError, match="max_inflight \\(0\\)"):
        RearmingKazooClient(hosts="127.0.0.1:1", max_inflight=0)


