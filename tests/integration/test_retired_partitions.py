"""Removed partitions stop costing ZooKeeper anything: once compaction passes every configuration that
named a partition, its snapshot pointer and its lineage entry move to the archive (one immutable file
each time it is removed), ZooKeeper's ``snapshots`` folder and compaction summary hold the live
partitions only, and every read of the removed partition answers as before."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.base.errors import CorruptPayload
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor
from airflow_epochs.coordination.state import retired_partitions
from airflow_epochs.coordination.state.retired_partitions import retired_file
from airflow_epochs.coordination.wire.compaction_record import CompactionSummary, RetiredPartition

ARCHIVE_WORKER = Path(__file__).resolve().parents[1] / "helpers" / "archive_worker.py"

pytestmark = [pytest.mark.integration]

# The configurations in force from each epoch: 7 partitions over the pipeline's life, at most 4 at once.
# The first keeps no archive (its epochs are compacted without one: p0's lineage entry is the only
# record of its newest seal's vector); p0 leaves no snapshots, every other partition one per epoch.
LIFE: list[tuple[int, Mapping[str, Sequence[str]]]] = [
    (1, {"p0": ("a",), "p1": ("a", "b"), "keep": ("a",)}),
    (4, {"p1": ("a", "b"), "p2": ("a",), "p3": ("a", "b"), "keep": ("a",)}),
    (7, {"p3": ("a", "b"), "p4": ("a",), "keep": ("a",)}),
    (10, {"p5": ("a",), "keep": ("a",)}),
]
LAST_EPOCH = 12


def _config(epoch: int, archive: Path | None) -> PipelineConfig:
    partitions = [parts for start, parts in LIFE if start <= epoch][-1]
    return PipelineConfig(dict(partitions), retain_epochs=1, archive=str(archive) if archive and epoch >= 4 else None)


def _run_epoch(ledger: EpochLedger, epoch: int) -> None:
    attempt = ledger.open_epoch(epoch)
    for partition, producers in sorted(_config(epoch, None).partitions.items()):
        for producer in producers:
            snapshot = None if partition == "p0" else f"s3://{partition}/{producer}/{epoch}"
            ledger.vote(attempt, partition, producer, {"e": epoch}, snapshot=snapshot,
                        upstream={"raw": epoch * 10 + len(partition)})


def _reads(ledger: EpochLedger, partition: str, last: int) -> tuple[object, ...]:
    """What a reader asks of a partition whose newest seal is at epoch ``last``."""
    return (ledger.last_sealed_snapshots(partition), ledger.last_sealed_snapshots(partition, before_epoch=last),
            ledger.last_sealed_snapshots(partition, before_epoch=last - 1), ledger.lineage(last, partition),
            ledger.lineage(last - 1, partition))


def _zk_size(zk, path: str) -> tuple[int, int]:
    """(znodes, data bytes) of ``path`` and its children."""
    data, _ = zk.get(path)
    names = zk.get_children(path)
    return 1 + len(names), len(data) + sum(len(zk.get(f"{path}/{n}")[0]) for n in names)


def test_removed_partitions_leave_zookeeper_and_read_as_before(zk, tmp_path):
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "shifting", owner="o")
    ledger.create_pipeline(_config(1, archive))
    last_seal: dict[str, int] = {}
    before: dict[str, tuple[object, ...]] = {}
    peak = {"snapshots": (0, 0), "summary": 0}
    retired: dict[str, int] = {}
    for epoch in range(1, LAST_EPOCH + 1):
        starts = {start for start, _ in LIFE}
        if epoch in starts and epoch > 1:
            ledger.set_config(_config(epoch, archive), from_epoch=epoch)
        _run_epoch(ledger, epoch)
        for partition in _config(epoch, None).partitions:
            last_seal[partition] = epoch
        for partition, last in last_seal.items():  # what the reads said while ZooKeeper held everything
            if partition not in retired and last >= 3:
                before[partition] = _reads(ledger, partition, last)
        peak["snapshots"] = max(peak["snapshots"], _zk_size(zk, ledger.paths.snapshots))
        report = ledger.compact()
        for name in report.retired:
            retired[name] = epoch
        if zk.exists(ledger.paths.archive):
            peak["summary"] = max(peak["summary"], len(zk.get(ledger.paths.archive)[0]))
    live = {"keep", "p5"}
    assert set(last_seal) == {"p0", "p1", "p2", "p3", "p4", "p5", "keep"}
    # each removed partition left at the compaction that passed its last configuration (retain_epochs=1)
    # (p0's configuration kept no archive: it leaves once the compaction point has one, at epoch 4)
    assert retired == {"p0": 5, "p1": 7, "p2": 7, "p3": 10, "p4": 10}
    assert set(zk.get_children(ledger.paths.snapshots)) == live
    summary = CompactionSummary.from_bytes(zk.get(ledger.paths.archive)[0], path=ledger.paths.archive)
    assert set(summary.lineage) <= live and summary.partitions_through == 9 and summary.retiring is None
    # the epochs the removed partitions' pointers named are compacted: ZooKeeper holds the newest epoch only
    assert zk.get_children(ledger.paths.epochs) == [f"{LAST_EPOCH:010d}"]
    for partition, last in last_seal.items():
        assert _reads(ledger, partition, last) == before[partition], partition
    # spot checks of what those reads are
    assert ledger.last_sealed_snapshots("p1")["b"].pointer == "s3://p1/b/6"
    assert ledger.last_sealed_snapshots("p4", before_epoch=9)["a"].pointer == "s3://p4/a/8"
    assert ledger.lineage(3, "p0") is not None and dict(ledger.lineage(3, "p0").upstream) == {"raw": 32}
    # the files: one per retirement, named by the compaction point, each holding what ZooKeeper held
    p0 = RetiredPartition.from_bytes((archive / retired_file("shifting", "p0", 4)).read_bytes(), where="p0")
    assert p0.pointer is None and p0.lineage is not None and p0.lineage.epoch == 3
    p3 = RetiredPartition.from_bytes((archive / retired_file("shifting", "p3", 9)).read_bytes(), where="p3")
    assert p3.pointer is not None and (p3.pointer.current.epoch, p3.pointer.previous.epoch) == (9, 8)
    assert sorted(p.name for p in (archive / "shifting" / "_partitions").iterdir()) == ["p0", "p1", "p2", "p3", "p4"]
    final = _zk_size(zk, ledger.paths.snapshots)
    print(f"\nsnapshots folder: peak {peak['snapshots'][0]} znodes / {peak['snapshots'][1]} bytes, "
          f"final {final[0]} znodes / {final[1]} bytes; summary: peak {peak['summary']} bytes, "
          f"final {len(zk.get(ledger.paths.archive)[0])} bytes")
    # repeated compactions write nothing again
    files = {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in (archive / "shifting" / "_partitions").rglob("*.json")}
    assert ledger.compact().retired == ()
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files} == files


def test_a_partition_removed_and_added_back_keeps_its_older_snapshot(zk, tmp_path):
    """Retired, then back in the configuration: until it seals a snapshot again its last one is read from
    the archive; afterwards the new pointer answers, and a question older than it still finds the old one."""
    archive = str(tmp_path / "storage")
    ledger = EpochLedger(zk, "returns", owner="o")
    both = {"back": ("a",), "keep": ("a",)}
    ledger.create_pipeline(PipelineConfig(both, retain_epochs=1, archive=archive))
    for epoch in range(1, 4):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "back", "a", {"e": epoch}, snapshot=f"s3://back/{epoch}")
        ledger.vote(attempt, "keep", "a", {"e": epoch})
        ledger.compact()
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=archive), from_epoch=4)
    for epoch in range(4, 7):
        ledger.vote(ledger.open_epoch(epoch), "keep", "a", {"e": epoch})
        ledger.compact()
    assert not zk.exists(ledger.paths.snapshot_pointer("back"))
    ledger.set_config(PipelineConfig(both, retain_epochs=1, archive=archive), from_epoch=7)
    attempt = ledger.open_epoch(7)
    assert ledger.last_sealed_snapshots("back", before_epoch=7)["a"].pointer == "s3://back/3"
    ledger.vote(attempt, "back", "a", {"e": 7}, snapshot="s3://back/7")
    ledger.vote(attempt, "keep", "a", {"e": 7})
    ledger.compact()
    assert ledger.last_sealed_snapshots("back")["a"].pointer == "s3://back/7"
    assert ledger.last_sealed_snapshots("back", before_epoch=7)["a"].pointer == "s3://back/3"
    assert ledger.last_sealed_snapshots("back", before_epoch=3)["a"].pointer == "s3://back/2"


def test_a_compaction_cut_short_between_archive_write_and_delete_is_finished_once(zk, tmp_path, monkeypatch):
    """An exception after the retirement file is written, before ZooKeeper deletes anything: the pointer
    and the lineage entry are still there, the summary names the retirement under way; the next
    compaction finds the file, verifies it (never rewrites it) and deletes; reads answer as before."""
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "cut", owner="o")
    first = {"gone": ("a", "b"), "keep": ("a",)}
    ledger.create_pipeline(PipelineConfig(first, retain_epochs=1, archive=str(archive)))
    for epoch in range(1, 4):
        attempt = ledger.open_epoch(epoch)
        for producer in ("a", "b"):
            ledger.vote(attempt, "gone", producer, {"e": epoch}, snapshot=f"s3://gone/{producer}/{epoch}",
                        upstream={"raw": epoch})
        ledger.vote(attempt, "keep", "a", {"e": epoch})
    ledger.compact()
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=str(archive)), from_epoch=4)
    ledger.vote(ledger.open_epoch(4), "keep", "a", {"e": 4})
    before = _reads(ledger, "gone", 3)
    written = retired_partitions.write_or_verify

    def cut_short(*args: object, **kwargs: object) -> None:
        written(*args, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("killed after the archive write")

    monkeypatch.setattr(retired_partitions, "write_or_verify", cut_short)
    with pytest.raises(RuntimeError, match="killed"):
        ledger.compact()
    monkeypatch.undo()
    target = archive / retired_file("cut", "gone", 3)
    assert target.exists()
    assert zk.exists(ledger.paths.snapshot_pointer("gone"))  # nothing deleted yet
    summary = CompactionSummary.from_bytes(zk.get(ledger.paths.archive)[0], path=ledger.paths.archive)
    assert "gone" in summary.lineage and summary.retiring == 3 and summary.partitions_through == 0
    assert _reads(ledger, "gone", 3) == before
    identity = (target.stat().st_ino, target.stat().st_mtime_ns)
    # the next compaction moves on to a later compaction point, yet finishes the retirement under way
    ledger.vote(ledger.open_epoch(5), "keep", "a", {"e": 5})
    report = EpochLedger(zk, "cut", owner="o").compact()
    assert report.retired == ("gone",)
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == identity
    assert not zk.exists(ledger.paths.snapshot_pointer("gone"))
    summary = CompactionSummary.from_bytes(zk.get(ledger.paths.archive)[0], path=ledger.paths.archive)
    assert "gone" not in summary.lineage and summary.retiring is None and summary.partitions_through == 3
    assert _reads(EpochLedger(zk, "cut", owner="o"), "gone", 3) == before
    assert EpochLedger(zk, "cut", owner="o").compact().retired == ()
    assert sorted(os.listdir(target.parent)) == [target.name]  # one file: written once, no temporaries


def test_an_altered_retirement_file_is_refused(zk, zk_factory, tmp_path):
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "altered", owner="o")
    ledger.create_pipeline(PipelineConfig({"gone": ("a",), "keep": ("a",)}, retain_epochs=1, archive=str(archive)))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "gone", "a", {"e": 1}, snapshot="s3://gone/1")
    ledger.vote(attempt, "keep", "a", {"e": 1})
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=str(archive)), from_epoch=2)
    ledger.vote(ledger.open_epoch(2), "keep", "a", {"e": 2})
    assert ledger.compact().retired == ("gone",)
    target = archive / retired_file("altered", "gone", 1)
    target.write_bytes(target.read_bytes().replace(b'"epoch":1', b'"epoch":0'))
    fresh = EpochLedger(zk_factory(), "altered", owner="o")  # a new client: nothing cached
    with pytest.raises(CorruptPayload, match="incomplete or altered"):
        fresh.last_sealed_snapshots("gone")


def test_without_storage_a_removed_partition_keeps_its_pointer_and_pinned_epochs(zk):
    """Without an archive nothing is shed: the removed partition's pointer still pins the epochs it names
    (found without listing the snapshots folder) and its last snapshot is read as before."""
    ledger = EpochLedger(zk, "plain", owner="o")
    ledger.create_pipeline(PipelineConfig({"gone": ("a",), "keep": ("a",)}, retain_epochs=1))
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "gone", "a", {"e": epoch}, snapshot=f"s3://gone/{epoch}")
        ledger.vote(attempt, "keep", "a", {"e": epoch})
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1), from_epoch=3)
    before = ledger.last_sealed_snapshots("gone"), ledger.last_sealed_snapshots("gone", before_epoch=2)
    for epoch in range(3, 7):
        ledger.vote(ledger.open_epoch(epoch), "keep", "a", {"e": epoch})
        report = ledger.compact()
        assert report.retired == ()
    assert {1, 2} <= set(report.kept)
    assert zk.exists(ledger.paths.snapshot_pointer("gone"))
    assert (ledger.last_sealed_snapshots("gone"), ledger.last_sealed_snapshots("gone", before_epoch=2)) == before
    assert before[0]["a"].pointer == "s3://gone/2" and before[1]["a"].pointer == "s3://gone/1"


def test_a_compaction_killed_between_the_retirement_file_and_the_delete_is_finished_once(
        zk_server, zk_chroot, zk, tmp_path):
    """kill -9 of the compacting process right after it wrote a removed partition's file: the next
    compaction, in another process, finishes the retirement with the same file, untouched."""
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "killed", owner="o")
    config = {"gone": ("a",), "keep": ("a",)}
    ledger.create_pipeline(PipelineConfig(config, retain_epochs=1, archive=str(archive)))
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "gone", "a", {"e": epoch}, snapshot=f"s3://gone/{epoch}", upstream={"raw": epoch})
        ledger.vote(attempt, "keep", "a", {"e": epoch})
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=str(archive)), from_epoch=3)
    ledger.vote(ledger.open_epoch(3), "keep", "a", {"e": 3})
    before = _reads(ledger, "gone", 2)
    worker = subprocess.run([sys.executable, str(ARCHIVE_WORKER), zk_server.address + zk_chroot, "killed", "retire"],
                            capture_output=True, text=True, timeout=120, env=zk_server.env())
    assert worker.returncode == -9, (worker.returncode, worker.stdout, worker.stderr[-2000:])
    assert "ARCHIVED" in worker.stdout and "NOT KILLED" not in worker.stdout
    target = archive / retired_file("killed", "gone", 2)
    identity = (target.stat().st_ino, target.stat().st_mtime_ns)
    assert zk.exists(ledger.paths.snapshot_pointer("gone"))
    assert _reads(ledger, "gone", 2) == before
    assert ledger.compact().retired == ("gone",)
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == identity
    assert not zk.exists(ledger.paths.snapshot_pointer("gone"))
    assert _reads(EpochLedger(zk, "killed", owner="o"), "gone", 2) == before
    assert sorted(os.listdir(target.parent)) == [target.name]


@pytest.mark.parametrize("storage", [True, False], ids=["archive", "no_archive"])
def test_zookeeper_holds_the_live_partitions_however_many_came_and_went(zk, tmp_path, storage):
    """20 configuration versions of 4 partitions each, 3 of them new every time (61 partitions over the
    pipeline's life), 2 epochs each: with an archive the snapshots folder and the summary's lineage hold
    the live partitions only; without one (nothing is shed,
    docs/operations/deploying.rst) they hold every partition ever."""
    archive = str(tmp_path / "storage") if storage else None
    ledger = EpochLedger(zk, "churn", owner="o")
    ever: set[str] = set()
    sizes = []
    for version in range(20):
        partitions = {"keep": ("a",), **{f"v{version}-{i}": ("a",) for i in range(3)}}
        config = PipelineConfig(partitions, retain_epochs=1, archive=archive)
        if version == 0:
            ledger.create_pipeline(config)
        else:
            ledger.set_config(config, from_epoch=2 * version + 1)
        ever |= set(partitions)
        for epoch in (2 * version + 1, 2 * version + 2):
            attempt = ledger.open_epoch(epoch)
            for partition in sorted(partitions):
                ledger.vote(attempt, partition, "a", {"e": epoch}, snapshot=f"s3://{partition}/{epoch}",
                            upstream={"raw": epoch})
            ledger.compact()
        sizes.append((_zk_size(zk, ledger.paths.snapshots), len(zk.get(ledger.paths.archive)[0])))
    pointers = set(zk.get_children(ledger.paths.snapshots))
    summary = CompactionSummary.from_bytes(zk.get(ledger.paths.archive)[0], path=ledger.paths.archive)
    print(f"\n{'archive' if storage else 'no archive'}: {len(ever)} partitions ever; snapshots folder "
          f"{sizes[0][0]} -> {sizes[-1][0]} (znodes, bytes) after the 1st and 20th version; summary "
          f"{sizes[0][1]} -> {sizes[-1][1]} bytes, {len(summary.lineage)} lineage entries; "
          f"{len(zk.get_children(ledger.paths.epochs))} epochs in ZooKeeper")
    if storage:
        assert pointers == {"keep", "v19-0", "v19-1", "v19-2"} and set(summary.lineage) == pointers
        assert max(size[0][0] for size in sizes) <= 1 + 8  # the folder, two versions' partitions at most
        assert zk.get_children(ledger.paths.epochs) == [f"{40:010d}"]
    else:
        assert pointers == ever and set(summary.lineage) == ever
    assert ledger.last_sealed_snapshots("v3-1")["a"].pointer == "s3://v3-1/8"
    assert dict(ledger.lineage(8, "v3-1").upstream) == {"raw": 8}


def test_the_delivery_cursor_of_a_removed_partition_no_longer_holds_compaction_back(zk, tmp_path):
    """A triggerer delivering a partition's seals keeps a cursor (the next epoch to deliver); compaction
    stops below it. Once no configuration names the partition at or after that epoch, no seal of it can
    come, so the cursor holds nothing back (before, a removed partition stopped compaction for good);
    a cursor still behind the partition's seals does hold it."""
    archive = str(tmp_path / "storage")
    ledger = EpochLedger(zk, "delivered", owner="o")
    ledger.create_pipeline(PipelineConfig({"gone": ("a",), "keep": ("a",)}, archive=archive))
    cursor = DeliveryPaths(ledger.paths).cursor("s", "gone")
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "gone", "a", {"e": 1}, snapshot="s3://gone/1")
    ledger.vote(attempt, "keep", "a", {"e": 1})
    ledger.set_config(PipelineConfig({"keep": ("a",)}, archive=archive), from_epoch=2)
    for epoch in (2, 3):
        ledger.vote(ledger.open_epoch(epoch), "keep", "a", {"e": epoch})
    zk.create(cursor, DeliveryCursor(1).to_bytes(), makepath=True)  # epoch 1 of "gone" not delivered yet
    report = ledger.compact()
    assert report.through == 0 and report.retired == ()
    zk.set(cursor, DeliveryCursor(2).to_bytes())  # delivered: nothing of "gone" after epoch 1 can come
    report = ledger.compact()
    assert report.through == 3 and report.retired == ("gone",)
    assert ledger.last_sealed_snapshots("gone")["a"].pointer == "s3://gone/1"


def test_a_partition_every_configuration_names_never_asks_storage(zk, tmp_path, monkeypatch):
    """Reads of a partition that was never removed (no pointer: it never left a snapshot) do not look for
    retirement files: they answer as before even with storage out of reach; a removed one does look."""
    archive = str(tmp_path / "storage")
    ledger = EpochLedger(zk, "steady", owner="o")
    ledger.create_pipeline(PipelineConfig({"keep": ("a",), "gone": ("a",)}, retain_epochs=1, archive=archive))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "keep", "a", {"e": 1})
    ledger.vote(attempt, "gone", "a", {"e": 1})
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=1, archive=archive), from_epoch=2)
    ledger.vote(ledger.open_epoch(2), "keep", "a", {"e": 2})
    ledger.compact()

    def unreachable(location: str, relative: str) -> list[str]:
        raise OSError(f"storage unreachable: {location}/{relative}")

    monkeypatch.setattr(retired_partitions, "stored_names", unreachable)
    assert ledger.last_sealed_snapshots("keep") == {}
    with pytest.raises(OSError, match="unreachable"):
        ledger.last_sealed_snapshots("gone")


def test_a_rollback_resets_the_live_pointers_and_leaves_retired_ones_alone(zk, tmp_path):
    """Rollback no longer lists ``snapshots``: it resets the pointers of the live configurations'
    partitions; a retired partition's reads are the same before and after it."""
    archive = str(tmp_path / "storage")
    ledger = EpochLedger(zk, "undone", owner="o")
    ledger.create_pipeline(PipelineConfig({"gone": ("a",), "keep": ("a",)}, retain_epochs=3, archive=archive))
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "gone", "a", {"e": epoch}, snapshot=f"s3://gone/{epoch}", upstream={"raw": epoch})
        ledger.vote(attempt, "keep", "a", {"e": epoch}, snapshot=f"s3://keep/{epoch}")
    ledger.set_config(PipelineConfig({"keep": ("a",)}, retain_epochs=3, archive=archive), from_epoch=3)
    retired: list[str] = []
    for epoch in range(3, 7):
        ledger.vote(ledger.open_epoch(epoch), "keep", "a", {"e": epoch}, snapshot=f"s3://keep/{epoch}")
        retired += ledger.compact().retired
    assert retired == ["gone"] and not zk.exists(ledger.paths.snapshot_pointer("gone"))
    before = _reads(ledger, "gone", 2)
    assert ledger.last_sealed_snapshots("keep")["a"].pointer == "s3://keep/6"
    assert ledger.rollback(4, reason="bad input") == [5, 6]
    assert ledger.last_sealed_snapshots("keep")["a"].pointer == "s3://keep/4"
    assert _reads(ledger, "gone", 2) == before
