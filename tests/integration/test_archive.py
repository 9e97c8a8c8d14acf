"""The past in the pipeline's storage: compaction archives each epoch's full record before it leaves
ZooKeeper, reads of archived epochs answer exactly as before, a compaction killed between the archive
write and the delete is finished by the next one, and an archive is written once."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from airflow_epochs.coordination import EpochLedger, InvalidConfig, PipelineConfig
from airflow_epochs.coordination.state.archive import decode, epoch_file
from airflow_epochs.hooks.ledgers import ledger_on

ARCHIVE_WORKER = Path(__file__).resolve().parents[1] / "helpers" / "archive_worker.py"

pytestmark = [pytest.mark.integration]

PARTITIONS = {"events": ("ingest",), "totals": ("sum", "check")}


def _run_epoch(ledger: EpochLedger, epoch: int) -> None:
    attempt = ledger.open_epoch(epoch)
    if epoch % 7 == 0:  # a superseded attempt: its votes stay in the record
        ledger.vote(attempt, "totals", "sum", {"e": epoch, "try": 1})
        ledger.abort_attempt(attempt, reason="retry")
        attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "events", "ingest", {"e": epoch, "location": f"/data/events/{epoch}"},
                upstream={"raw": epoch})
    ledger.vote(attempt, "totals", "sum", {"e": epoch}, snapshot=f"s3://totals/{epoch}" if epoch % 5 == 0 else None)
    ledger.vote(attempt, "totals", "check", {"e": epoch, "rows": epoch * 10})


def _reads(ledger: EpochLedger, epoch: int) -> tuple[object, ...]:
    return (ledger.epoch_info(epoch), ledger.seal(epoch, "events"), ledger.seal(epoch, "totals"),
            ledger.seal_record(epoch, "events"), ledger.seal_record(epoch, "totals"),
            ledger.vote_of(epoch, "totals", "sum"), ledger.vote_of(epoch, "totals", "check"),
            ledger.vote_of(epoch, "events", "ingest"), ledger.vote_of(epoch, "totals", "sum", attempt=1))


@pytest.mark.parametrize("retain", [3, None], ids=["retain_3", "default_window"])
def test_archived_epochs_read_exactly_as_before_they_left_zookeeper(zk, tmp_path, retain):
    """30 epochs with retain_epochs=3, and with the default window of an archived pipeline (0: a
    sealed epoch leaves ZooKeeper at the next compaction): every epoch's reads (epoch, seals with
    votes and manifests, seal records, votes, a superseded attempt's vote) and the whole history are
    the same after compaction moved them to the archive as they were while ZooKeeper held them."""
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "past", owner="o")
    window = {} if retain is None else {"retain_epochs": retain}
    ledger.create_pipeline(PipelineConfig(PARTITIONS, archive=str(archive), **window))
    kept = 3 if retain is not None else 0
    before: dict[int, tuple[object, ...]] = {}
    seen = []
    written: list[int] = []
    for epoch in range(1, 31):
        _run_epoch(ledger, epoch)
        before[epoch] = _reads(ledger, epoch)
        seen.extend(ledger.history(since_seq=seen[-1].seq if seen else -1))
        report = ledger.compact()
        written.extend(report.archived)
        # archived, an epoch a snapshot pointer pins leaves ZooKeeper too: nothing is kept, nothing re-verified
        assert report.kept == () and report.verified == (), report
    assert sorted(written) == list(range(1, 31 - kept))  # each epoch written once, the kept ones not yet
    assert {int(n) for n in zk.get_children(ledger.paths.epochs)} == set(range(31 - kept, 31))
    for epoch in range(1, 31):
        assert _reads(ledger, epoch) == before[epoch], epoch
    # the snapshot of epoch 25, which the pointer still names as the previous one, is read from the archive
    assert ledger.last_sealed_snapshots("totals", before_epoch=26)["sum"].pointer == "s3://totals/25"
    assert ledger.last_sealed_snapshots("totals")["sum"].pointer == "s3://totals/30"
    assert ledger.epoch_info(5).attempt_state == "sealed"  # not the bare "compacted" of an unarchived past
    assert before[7][8] is not None and before[7][8].attempt == 1  # the superseded attempt's vote survived
    # the history: every event ever recorded, in order, from any cursor
    history = ledger.history()
    assert history[: len(seen)] == seen and len(history) >= len(seen)
    assert min(e.seq for e in history) == 0
    cursor = seen[40].seq
    assert ledger.history(since_seq=cursor, limit=25) == [e for e in history if e.seq > cursor][:25]
    # the files: one per epoch, canonical, named by epoch
    files = sorted((archive / "past" / "_epochs").iterdir())
    assert [f.name for f in files] == [f"epoch-{e:012d}.jsonl" for e in range(1, 31 - kept)]
    record = decode(files[0].read_bytes(), where=str(files[0]))
    assert record.epoch == 1 and record.events and any(p.startswith("/epochs/") for p in record.znodes)
    assert all(oct(f.stat().st_mode & 0o777) == "0o640" for f in files)


def test_a_pipeline_without_storage_compacts_as_before(zk):
    ledger = EpochLedger(zk, "forgets", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=2))
    for epoch in range(1, 7):
        _run_epoch(ledger, epoch)
    report = ledger.compact()
    assert report.archived == () and set(report.compacted) == {1, 2, 3, 4}
    info = ledger.epoch_info(2)
    assert (info.state, info.attempt_state) == ("sealed", "compacted")
    assert ledger.seal(2, "events") is None


@pytest.mark.parametrize("location, reason", [
    ("relative/dir", "absolute path"),
    ("ftp://host/archive", "scheme 'ftp'"),
    ("s3://key:secret@bucket/archive", "credentials"),
    ("s3://bucket/archive?token=x", "holds '\\?'"),
    ("/data/../etc", "'..'"),
    ("", "1 to 1024"),
])
def test_a_bad_archive_location_is_refused_before_anything_is_written(zk, location, reason):
    ledger = EpochLedger(zk, "bad", owner="o")
    with pytest.raises(InvalidConfig, match=reason) as refused:
        ledger.create_pipeline(PipelineConfig(PARTITIONS, archive=location))
    assert "secret" not in str(refused.value)
    assert not zk.exists(ledger.paths.base)


@pytest.mark.parametrize("retain", [2, None], ids=["retain_2", "default_window"])
def test_a_compaction_killed_between_archive_and_delete_is_finished_once(zk_server, zk_chroot, zk, tmp_path, retain):
    """kill -9 of the compacting process after its archive writes, before any ZooKeeper delete: the
    epochs are still in ZooKeeper, the files are complete; the next compaction verifies the files
    (never rewrites them), deletes the epochs, and reads give what they gave before."""
    archive = tmp_path / "storage"
    ledger = EpochLedger(zk, "crash", owner="o")
    window = {} if retain is None else {"retain_epochs": retain}
    ledger.create_pipeline(PipelineConfig(PARTITIONS, archive=str(archive), **window))
    through = 6 - (retain or 0)  # the default window of an archived pipeline compacts the frontier too
    for epoch in range(1, 7):
        _run_epoch(ledger, epoch)
    before = {epoch: _reads(ledger, epoch) for epoch in range(1, 7)}
    history = ledger.history()
    worker = subprocess.run([sys.executable, str(ARCHIVE_WORKER),
                             zk_server.address + zk_chroot, "crash"], capture_output=True, text=True, timeout=120,
                            env=zk_server.env())
    assert worker.returncode == -9, (worker.returncode, worker.stdout, worker.stderr[-2000:])
    assert "ARCHIVED" in worker.stdout and "NOT KILLED" not in worker.stdout
    first = Path(epoch_file(str(archive), "crash", 1))
    assert first.exists()
    assert 1 in [int(n) for n in zk.get_children(ledger.paths.epochs)]  # nothing deleted yet
    identity = {e: (os.stat(epoch_file(str(archive), "crash", e)).st_ino,
                    os.stat(epoch_file(str(archive), "crash", e)).st_mtime_ns)
                for e in range(1, through + 1) if os.path.exists(epoch_file(str(archive), "crash", e))}
    assert identity, "the killed compaction wrote no archive"

    report = EpochLedger(zk, "crash", owner="o").compact()
    assert set(report.verified) == set(identity)
    assert set(report.archived) == set(range(1, through + 1)) - set(identity)
    assert set(report.compacted) == set(range(1, through + 1))
    for epoch, (inode, mtime) in identity.items():
        stat = os.stat(epoch_file(str(archive), "crash", epoch))
        assert (stat.st_ino, stat.st_mtime_ns) == (inode, mtime), "an archive was written twice"
    assert sorted(int(n) for n in zk.get_children(ledger.paths.epochs)) == list(range(through + 1, 7))
    fresh = EpochLedger(zk, "crash", owner="o")
    for epoch in range(1, 7):
        assert _reads(fresh, epoch) == before[epoch], epoch
    assert fresh.history()[: len(history)] == history
    assert not list((archive / "crash" / "_epochs").glob("*.tmp"))


def test_an_archive_given_as_a_file_uri_goes_through_pyarrow(zk, tmp_path):
    """The location is opened with pyarrow's filesystems: a ``file://`` URI works like a path."""
    ledger = EpochLedger(zk, "uri", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=1, archive=f"file://{tmp_path}/store"))
    for epoch in range(1, 5):
        _run_epoch(ledger, epoch)
    before = _reads(ledger, 2)
    assert set(ledger.compact().archived) == {1, 2, 3}
    assert (tmp_path / "store" / "uri" / "_epochs" / "epoch-000000000002.jsonl").is_file()
    assert _reads(EpochLedger(zk, "uri", owner="o"), 2) == before


def test_an_altered_archive_is_refused_not_read_as_a_shorter_past(zk, zk_factory, tmp_path):
    from airflow_epochs.coordination import CorruptPayload

    ledger = EpochLedger(zk, "tampered", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=1, archive=str(tmp_path)))
    for epoch in range(1, 4):
        _run_epoch(ledger, epoch)
    ledger.compact()
    path = Path(epoch_file(str(tmp_path), "tampered", 1))
    lines = path.read_bytes().splitlines(keepends=True)
    path.chmod(0o600)
    path.write_bytes(b"".join(lines[:2] + lines[-1:]))  # votes cut out, the end line kept
    with pytest.raises(CorruptPayload, match="digest mismatch"):  # a fresh client: nothing cached
        EpochLedger(zk_factory(), "tampered", owner="o").seal(1, "totals")


def test_an_archive_folder_or_file_others_could_plant_is_refused(zk, zk_factory, tmp_path):
    """Whoever can write the archive can rewrite the past: a linked or world-writable folder, or a file
    replaced by a link, is refused (``UnsafeArchive``) before anything is written or read through it."""
    from airflow_epochs.coordination.state.archive_storage import UnsafeArchive

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "linked" / "_epochs").mkdir(parents=True)
    store = tmp_path / "store"
    store.mkdir()
    (store / "linked").symlink_to(elsewhere / "linked")
    ledger = EpochLedger(zk, "linked", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=1, archive=str(store)))
    for epoch in range(1, 4):
        _run_epoch(ledger, epoch)
    with pytest.raises(UnsafeArchive, match="symbolic link"):
        ledger.compact()
    assert list((elsewhere / "linked" / "_epochs").iterdir()) == []
    assert ledger.epoch_info(1).state == "sealed"  # nothing was deleted from ZooKeeper either

    (store / "linked").unlink()
    ledger.compact()
    path = Path(epoch_file(str(store), "linked", 1))
    planted = tmp_path / "planted.jsonl"
    planted.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(planted)
    with pytest.raises(UnsafeArchive, match="symbolic link"):
        EpochLedger(zk_factory(), "linked", owner="o").seal(1, "totals")
    path.unlink()
    planted.rename(path)
    os.chmod(path.parent, 0o777)
    with pytest.raises(UnsafeArchive, match="writable by others"):
        EpochLedger(zk_factory(), "linked", owner="o").seal(1, "totals")


def test_an_archive_under_another_users_folder_is_refused_before_a_byte_goes_through_their_link(zk, tmp_path):
    """Issue 48, item 9: an archive folder of ours inside another local user's folder is theirs to swap: they
    renamed it and put a link into another tree in its place, and compaction (as root) wrote the past there,
    and readers read what that tree held. Now the whole path is checked like our state folder's: compaction
    is refused naming the other user's folder, nothing reaches the tree the link points at and nothing leaves
    ZooKeeper; a read through the link is refused too."""
    from intruder import second_user, shared_folder

    from airflow_epochs.coordination.state.archive_storage import UnsafeArchive, read_stored

    elsewhere = tmp_path / "elsewhere"  # another tree (ours here), where their link leads
    (elsewhere / "swapped" / "_epochs").mkdir(parents=True)
    (elsewhere / "swapped" / "_epochs" / "epoch-000000000001.jsonl").write_text("planted\n")
    planted = sorted(elsewhere.rglob("*"))
    with second_user() as intruder, shared_folder() as shared:
        theirs = shared / "theirs"
        intruder.run(["mkdir", "-m", "755", str(theirs)])
        archive = theirs / "archive"
        archive.mkdir()  # ours, in their folder
        ledger = EpochLedger(zk, "swapped", owner="o")
        ledger.create_pipeline(PipelineConfig(PARTITIONS, retain_epochs=1, archive=str(archive)))
        for epoch in range(1, 4):
            _run_epoch(ledger, epoch)
        intruder.run(["mv", str(archive), str(theirs / "archive.old")])  # the swap, as that user
        intruder.run(["ln", "-s", str(elsewhere), str(archive)])
        with pytest.raises(UnsafeArchive, match="owned by another user") as refused:
            ledger.compact()
        assert str(theirs) in str(refused.value) and intruder.name in str(refused.value)
        assert sorted(elsewhere.rglob("*")) == planted  # nothing written through the link
        assert ledger.epoch_info(1).state == "sealed"  # nothing left ZooKeeper either
        with pytest.raises(UnsafeArchive, match="owned by another user"):
            read_stored(str(archive), "swapped/_epochs/epoch-000000000001.jsonl")  # nor read through it


def test_the_epochs_page_status_and_timeline_show_an_archived_epoch_as_before(zk, tmp_path):
    """With the default window (a sealed epoch leaves ZooKeeper at the next compaction), the Epochs
    page's detail and grid row, ``status`` and ``timeline``'s spans show each epoch after it left ZooKeeper
    exactly as they did while ZooKeeper held it."""
    from airflow_epochs.views.pipeline import StateReader
    from airflow_epochs.views.status import epoch_status
    from airflow_epochs.views.timeline import spans

    ledger = EpochLedger(zk, "shown", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, archive=str(tmp_path / "storage")))
    reader = StateReader(partial(ledger_on, zk))
    before: dict[int, tuple[object, ...]] = {}

    def shown(epoch: int) -> tuple[object, ...]:
        page = reader.pipeline("shown")  # one page, its history cursor kept across reads, as the UI does
        rows = [row for row in page.grid(limit=50).rows if row.epoch == epoch]
        drawn = spans(ledger.history(), [epoch])  # what ``timeline`` draws
        # the page's attempt list comes from its history cache, loaded in the background on first use
        # (timing): the events behind it are compared through ``ledger.history()``
        return page.epoch_detail(epoch, history=False), rows, drawn, epoch_status(ledger, epoch), \
            [e for e in ledger.history() if e.record.epoch == epoch]

    for epoch in range(1, 11):
        _run_epoch(ledger, epoch)
        before[epoch] = shown(epoch)
        assert ledger.compact().archived == (epoch,)
        assert zk.get_children(ledger.paths.epochs) == []
    for epoch in range(1, 11):
        after = shown(epoch)
        assert after == before[epoch], epoch
        assert after[1] and after[2], epoch  # a row and spans were there to compare
    fresh = StateReader(partial(ledger_on, zk)).pipeline("shown")  # a new page reads the archived past the same way
    assert fresh.epoch_detail(4, history=False) == before[4][0]
    reader.close()
