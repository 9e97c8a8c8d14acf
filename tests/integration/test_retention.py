"""Bounded state on a real ZooKeeper: retention compacts old epochs (keeping what retries and lineage
need), the snapshot a retry starts from is found without walking back, history is read from a
cursor, and every configuration the ledger accepts can be sealed."""

from __future__ import annotations

import datetime

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import (
    EpochAlreadySealed,
    EpochLedger,
    InvalidConfig,
    PipelineConfig,
    RollbackRefused,
    lineage_of,
    open_as_leader,
)

pytestmark = [pytest.mark.integration]


def _epoch(ledger: EpochLedger, epoch: int, *, snapshot: str | None = None) -> None:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "events", "ingest", {"e": epoch}, upstream={"raw": epoch})
    ledger.vote(attempt, "totals", "sum", {"e": epoch}, snapshot=snapshot)


def _requests(ledger: EpochLedger) -> int:
    stats = ledger.session.stats
    return stats["reads"] + stats["transactions"] + stats["failed_transactions"]


def test_retention_compacts_old_epochs_and_keeps_what_retries_need(zk):
    ledger = EpochLedger(zk, "kept", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=3))
    _epoch(ledger, 1, snapshot="s3://totals/1")  # the only snapshot: a retry of any later epoch needs it
    for epoch in range(2, 13):
        _epoch(ledger, epoch)
    live = ledger.open_epoch(13)
    report = ledger.compact()
    assert report.through == 9  # frontier 12, three epochs kept in full
    assert report.kept == (1,)  # named by the snapshot pointer
    assert set(report.compacted) == set(range(2, 10))
    assert sorted(zk.get_children(ledger.paths.epochs)) == [f"{e:010d}" for e in (1, 10, 11, 12, 13)]

    assert ledger.frontier() == 12
    ref = ledger.last_sealed_snapshot("totals", before_epoch=13)
    assert (ref.epoch, ref.pointer) == (1, "s3://totals/1")
    info = ledger.epoch_info(5)
    assert (info.state, info.attempt_state) == ("sealed", "compacted")
    assert lineage_of(ledger, 9, "events").upstream == {"raw": 9}  # the newest compacted seal's vector
    assert lineage_of(ledger, 12, "events").upstream == {"raw": 12}
    events = ledger.history()
    assert all(e.record.epoch is None or e.record.epoch >= 10 for e in events), events[:3]
    with pytest.raises(RollbackRefused, match="compacted"):
        ledger.rollback(8, reason="too far back")
    with pytest.raises(EpochAlreadySealed):
        ledger.open_epoch(5)
    # a compaction cut short is finished by the next one; a second run changes nothing
    assert ledger.compact().compacted == ()
    before = tree(zk, ledger.paths.base)
    ledger.compact()
    assert tree(zk, ledger.paths.base) == before
    # the live attempt was never touched: it seals its epoch
    assert ledger.vote(live, "events", "ingest", {"e": 13}).partition_sealed
    assert ledger.vote(live, "totals", "sum", {"e": 13}).epoch_sealed


def test_state_and_reads_do_not_grow_with_the_epochs_behind(zk):
    """The coordinator applies retention as it opens epochs: znodes plateau, and the snapshot lookup
    and the latest-event read cost the same at epoch 20 as at epoch 120."""
    ledger = EpochLedger(zk, "flat", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=10))
    sizes: dict[int, int] = {}
    costs: dict[int, tuple[int, int]] = {}
    for epoch in range(1, 121):
        decision = open_as_leader(ledger, epoch, lease_duration=datetime.timedelta(minutes=5))
        ledger.vote(decision.attempt, "events", "ingest", {"e": epoch})
        ledger.vote(decision.attempt, "totals", "sum", {"e": epoch}, snapshot="s3://t/1" if epoch == 1 else None)
        if epoch in (20, 120):
            sizes[epoch] = len(tree(zk, ledger.paths.base))
            before = _requests(ledger)
            assert ledger.last_sealed_snapshot("totals", before_epoch=epoch + 1).epoch == 1
            middle = _requests(ledger)
            assert ledger.latest_event().event == "epoch_sealed"
            costs[epoch] = (middle - before, _requests(ledger) - middle)
    assert costs[120] == costs[20]
    assert sizes[120] <= sizes[20] * 1.1, sizes


def test_history_is_read_from_a_cursor(zk):
    ledger = EpochLedger(zk, "cursor", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}))
    _epoch(ledger, 1)
    first = ledger.history()
    _epoch(ledger, 2)
    newer = ledger.history(since_seq=first[-1].seq)
    assert [e.event for e in newer] == ["epoch_opened", "partition_sealed", "partition_sealed", "epoch_sealed"]
    assert all(e.record.epoch == 2 for e in newer)
    assert [e.seq for e in ledger.history()] == [e.seq for e in first + newer]
    latest = ledger.latest_event()
    assert (latest.seq, latest.event) == (newer[-1].seq, "epoch_sealed")
    assert ledger.history(since_seq=latest.seq) == []


def test_every_accepted_shape_seals_and_too_large_ones_are_refused(zk):
    # 499 producers with 128-character names: their configuration alone is over the znode budget
    long_names = tuple(f"{i:03d}" + "p" * 125 for i in range(499))
    with pytest.raises(InvalidConfig, match="bytes as JSON"):
        PipelineConfig({"wide": long_names})
    # the widest shape that fits (300 long-named producers) seals: its seal does not list them
    names = long_names[:300]
    ledger = EpochLedger(zk, "wide", owner="o")
    ledger.create_pipeline(PipelineConfig({"wide": names}))
    attempt = ledger.open_epoch(1)
    results = [ledger.vote(attempt, "wide", name, {"rows": 1}, snapshot=f"s3://w/{i}" if i % 50 == 0 else None)
               for i, name in enumerate(names)]
    assert [r.partition_sealed for r in results] == [False] * 299 + [True]
    assert results[-1].epoch_sealed
    raw, _ = zk.get(ledger.paths.seal(1, 1, "wide"))
    assert len(raw) < 2000
    assert sorted(ledger.last_sealed_snapshots("wide")) == sorted(names[i] for i in range(0, 300, 50))


def test_cli_reads_history_from_a_cursor_and_compacts(zk, zk_server, zk_chroot):
    import subprocess
    import sys
    from pathlib import Path

    ledger = EpochLedger(zk, "cli", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=2))
    for epoch in range(1, 7):
        _epoch(ledger, epoch, snapshot="s3://t/1" if epoch == 1 else None)
    cli = [str(Path(sys.executable).parent / "airflow-epochs")]
    hosts = zk_server.cli_args(zk_chroot)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args, *hosts], capture_output=True, text=True, timeout=120, env=zk_server.env())

    cursor = ledger.history()[-4].seq  # the events after it: the last three
    newer = run("history", "cli", "--since", str(cursor))
    assert newer.returncode == 0, newer.stderr
    assert [line.split()[2] for line in newer.stdout.splitlines()] == ["partition_sealed", "partition_sealed",
                                                                      "epoch_sealed"]
    compacted = run("compact", "cli")
    assert compacted.returncode == 0, compacted.stderr
    assert "compacted through epoch 4" in compacted.stdout
    assert "kept in full for their snapshots: [1]" in compacted.stdout
    bad = run("history", "cli", "--since", "minus-one")
    assert bad.returncode == 2 and "must be a non-negative integer" in bad.stderr and "Traceback" not in bad.stderr


def test_a_configuration_stored_before_the_window_was_always_written_keeps_its_old_window(zk):
    """Versions written when ``retain_epochs`` was left out at the old default (1000) must not read
    as today's default of 2: compaction would then drop epochs their owners meant to keep."""
    from airflow_epochs.coordination.wire import payloads
    from airflow_epochs.coordination.wire.config import UNARCHIVED_RETAIN_EPOCHS
    from airflow_epochs.coordination.wire.nodes import LEGACY_RETAIN_EPOCHS

    ledger = EpochLedger(zk, "legacy", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}))
    path = ledger.paths.config(0)
    raw, _ = zk.get(path)
    written = payloads.decode("config", raw, path=path)
    assert written["retain_epochs"] == UNARCHIVED_RETAIN_EPOCHS  # written explicitly now
    zk.set(path, payloads.encode("config", {k: v for k, v in written.items() if k != "retain_epochs"}))
    assert ledger.config_for(1).config.retain_epochs == LEGACY_RETAIN_EPOCHS  # first read of version 0
    explicit = EpochLedger(zk, "explicit", owner="o")
    explicit.create_pipeline(PipelineConfig({"events": ("ingest",)}, retain_epochs=None))  # keep everything
    assert explicit.config_for(1).config.retain_epochs is None


def test_the_default_window_is_short_only_for_pipelines_with_an_archive(zk, tmp_path):
    """Without an archive compaction forgets seals and manifests, so the default keeps 1000 epochs;
    with one, every read of an older epoch is answered from the archive and none is kept: a sealed
    epoch leaves ZooKeeper at the next compaction. 0 is refused without an archive."""
    from airflow_epochs.coordination.wire.config import DEFAULT_RETAIN_EPOCHS, UNARCHIVED_RETAIN_EPOCHS

    assert PipelineConfig({"events": ("ingest",)}).retain_epochs == UNARCHIVED_RETAIN_EPOCHS
    archived = PipelineConfig({"events": ("ingest",)}, archive=str(tmp_path))
    assert archived.retain_epochs == DEFAULT_RETAIN_EPOCHS
    assert PipelineConfig.from_json(archived.to_json()) == archived
    assert PipelineConfig({"events": ("ingest",)}, retain_epochs=5, archive=str(tmp_path)).retain_epochs == 5
    with pytest.raises(InvalidConfig, match=r"retain_epochs.*without an archive.*not 0"):
        PipelineConfig({"events": ("ingest",)}, retain_epochs=0)
    assert DEFAULT_RETAIN_EPOCHS == 0
    ledger = EpochLedger(zk, "archived", owner="o")
    ledger.create_pipeline(archived)
    for epoch in range(1, 6):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "events", "ingest", {"rows": epoch})
    report = ledger.compact()
    assert report.through == 5 and set(report.archived) == {1, 2, 3, 4, 5}  # frontier 5, none kept
    assert zk.get_children(ledger.paths.epochs) == []
    assert ledger.seal(1, "events").manifests["ingest"] == {"rows": 1}  # answered from the archive
    assert ledger.seal(5, "events").manifests["ingest"] == {"rows": 5}
    ledger.vote(ledger.open_epoch(6), "events", "ingest", {"rows": 6})  # the next opening needs no epoch 5


def test_a_pipeline_request_is_remembered_one_compaction_behind_the_epochs(zk, tmp_path):
    """With an archive's default window the frontier epoch itself is compacted when the next one opens;
    a pipeline-level request sent while it was open is still found when repeated after that compaction
    (a repeated unregistration still answers True), and is forgotten one compaction later."""
    ledger = EpochLedger(zk, "requests", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",)}, archive=str(tmp_path)))
    ledger.consumer("reader").register()

    def seal(epoch: int) -> None:
        ledger.vote(ledger.open_epoch(epoch), "events", "ingest", {"rows": epoch})

    seal(1)
    seal(2)
    assert ledger.compact().through == 2  # a summary is there: the window runs from here
    attempt = ledger.open_epoch(3)
    assert ledger.consumer("reader").unregister(request_id="bye") is True
    ledger.vote(attempt, "events", "ingest", {"rows": 3})
    seal(4)
    assert ledger.compact().through == 4  # the epoch the request was sent in left ZooKeeper
    assert zk.exists(ledger.paths.request("bye")) is not None
    assert ledger.consumer("reader").unregister(request_id="bye") is True  # found: the first call's answer
    assert ledger.consumer("reader").unregister(request_id="again") is False  # a new request: nothing to remove
    seal(5)
    seal(6)
    assert ledger.compact().through == 6
    assert zk.exists(ledger.paths.request("bye")) is None  # forgotten one compaction later
