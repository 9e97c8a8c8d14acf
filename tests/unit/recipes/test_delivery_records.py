"""The delivery family's records as pure values: the rollback count moving cursors back, the order in
which cursor moves win, and the asset event's one record to and from an event's ``extra``."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import CorruptPayload
from airflow_epochs.coordination.recipes.delivery.records import (
    MAX_REWINDS,
    CorrectedVersions,
    DeliveryCursor,
    DeliveryRewinds,
    SealedPartitionEvent,
)


def test_a_cursor_reads_as_moved_back_by_the_rollbacks_its_writer_had_not_seen():
    rewinds = DeliveryRewinds().after(5).after(3)
    assert rewinds.count == 2
    assert rewinds.position(DeliveryCursor(9, 0)) == 4  # both unseen: back to just after epoch 3
    assert rewinds.position(DeliveryCursor(9, 1)) == 4  # the second unseen
    assert rewinds.position(DeliveryCursor(9, 2)) == 9  # seen both: where it stands
    assert rewinds.position(DeliveryCursor(3, 0)) == 3  # never moved forward by a rollback
    assert DeliveryRewinds().after(7).position(DeliveryCursor(9, 0)) == 8


def test_rollbacks_no_longer_kept_move_a_cursor_as_far_back_as_the_oldest_kept():
    rewinds = DeliveryRewinds(5, ((4, 8), (5, 6)))
    assert rewinds.since(1) == 6 and rewinds.since(4) == 6 and rewinds.since(5) is None
    assert DeliveryRewinds(1000 + 3, ()).since(2) == 0  # nothing kept: from the start again


def test_the_record_keeps_the_newest_rollbacks_and_trims_what_every_cursor_saw():
    rewinds = DeliveryRewinds()
    for epoch in range(MAX_REWINDS + 5):
        rewinds = rewinds.after(epoch)
    assert len(rewinds.entries) == MAX_REWINDS and rewinds.entries[0] == (6, 5)
    assert rewinds.trimmed(MAX_REWINDS).entries == tuple((n, n - 1) for n in range(MAX_REWINDS + 1, MAX_REWINDS + 6))
    again = DeliveryRewinds.from_bytes(rewinds.to_bytes(), path="/r")
    assert again == rewinds


def test_only_a_higher_pair_of_rollbacks_seen_and_next_epoch_moves_a_cursor():
    stored = DeliveryCursor(3, 1)
    assert stored.behind(4, 1) and stored.behind(2, 2)  # further on, or having seen a newer rollback
    assert not stored.behind(3, 1) and not stored.behind(9, 0)  # a confirmation from before the rollback


def test_a_cursor_written_before_rollbacks_were_counted_still_reads():
    assert DeliveryCursor.from_bytes(b"7", path="/c") == DeliveryCursor(7, 0)
    with pytest.raises(CorruptPayload, match="rewinds"):
        DeliveryCursor.from_bytes(b'{"schema": 2, "kind": "asset_cursor", "following": 3, "rewinds": -1}', path="/c")


def test_every_asset_event_has_one_record_to_and_from_its_extra():
    seal = SealedPartitionEvent("sales", "orders", 4, 2, attempt=7, zxid=123)
    assert seal.to_extra() == {"pipeline": "sales", "partition": "orders", "epoch": 4, "generation": 2,
                               "partition_key": "4", "version": 1, "dedupe_key": "sales/orders/4/2/7",
                               "attempt": 7, "zxid": 123}
    assert SealedPartitionEvent.from_extra(seal.to_extra()) == seal
    assert SealedPartitionEvent.from_extra({"payload": seal.to_extra()}) == seal  # as a watcher stores it
    version = SealedPartitionEvent("sales", "orders", 4, 2, version=3, correction="c-1", partition_key="2013-01-04",
                                   declared=True)
    assert version.dedupe_key == "sales/orders/4/2/v3"
    assert SealedPartitionEvent.from_extra(version.to_extra()) == version
    older = {"pipeline": "sales", "partition": "orders", "epoch": 4, "attempt": 7, "seal_zxid": 9}  # before 2026-12
    assert SealedPartitionEvent.from_extra(older).zxid == 9
    with pytest.raises(CorruptPayload, match="sealed partition"):
        SealedPartitionEvent.from_extra({"payload": {"epoch": "x"}})


def test_a_corrections_events_for_several_keys_give_each_key_its_own_record():
    """One task emits the events of a correction's versions for several partition keys with one ``extra``: each
    key reads back its own version (and a key the correction did not re-seal is refused, naming it)."""
    corrected = CorrectedVersions("sales", "daily", "c-7", {3: (1, 2), 4: (1, 2), 5: (2, 3)})
    extra = corrected.to_extra()
    assert CorrectedVersions.from_extra(extra) == corrected
    assert SealedPartitionEvent.from_extra(extra, partition_key="5") == SealedPartitionEvent(
        "sales", "daily", 5, 2, version=3, correction="c-7")
    assert SealedPartitionEvent.from_extra(extra, partition_key="3").dedupe_key == "sales/daily/3/1/v2"
    with pytest.raises(CorruptPayload, match="not partition key '9'"):
        SealedPartitionEvent.from_extra(extra, partition_key="9")
    with pytest.raises(CorruptPayload, match="correction"):
        SealedPartitionEvent.from_extra({"pipeline": "sales", "versions": {"x": 1}}, partition_key="3")
