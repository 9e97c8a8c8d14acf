"""A correction judges a seal by the version it read, not by when its attempt started (issue 47, item 6).

The pipeline is a running total: ``weather`` is an input, ``totals`` reads ``weather`` at its epoch and
its own snapshot of the epoch before. Correcting ``weather`` at epoch 3 of 6 re-produces ``totals``@3..6.
Epoch 7 opens before those re-seals land (its attempt is older than every one of them) and its producer
votes after them. The race is about what that producer read:

- it read ``totals``@6 after version 2 sealed (the corrected running total): its seal is not stale, the
  plan stays the 4 seals, and the correction finishes without re-running it;
- it read version 1 before the re-seal and voted after it: its seal is stale and is re-run (5 seals);
- its vote names no versions (a producer, or a vote, from before ``read_versions``): it is judged by
  when its attempt started, as before, and re-run.

Every case ends with figures equal to a clean run over the corrected input. Real ZooKeeper.
"""

from __future__ import annotations

import threading
import time

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import Ballot, EpochLedger, InvalidInput, PipelineConfig
from airflow_epochs.coordination.recipes.corrections import invalidation
from airflow_epochs.coordination.recipes.corrections.records import read_key

pytestmark = [pytest.mark.integration]

PARTITIONS = {"weather": ("w",), "totals": ("t",)}
EPOCHS = 6
WEATHER = {e: 10 * e for e in range(1, 12)}
CORRECTED = {**WEATHER, 3: 10 * 3 + 7}
PLAN = [(e, "totals") for e in range(3, EPOCHS + 1)]


def weather_value(ledger: EpochLedger, epoch: int) -> tuple[int, int]:
    view = ledger.corrections.sealed_version(epoch, "weather")
    assert view is not None, epoch
    return int(view.manifests["w"]["value"]), view.version


# [START read_versions]
def read_totals(ledger: EpochLedger, epoch: int) -> tuple[int, dict[str, int], dict[str, int]]:
    """What the ``totals`` producer reads for ``epoch``: its total, its lineage vector and the versions read."""
    prev = ledger.last_sealed_snapshot("totals", before_epoch=epoch, producer="t")
    value, version = weather_value(ledger, epoch)
    up = {read_key(ledger.pipeline, "weather"): epoch}
    versions = {read_key(ledger.pipeline, "weather"): version}
    if prev is not None:
        up[read_key(ledger.pipeline, "totals")] = prev.epoch
        versions[read_key(ledger.pipeline, "totals")] = prev.version
    return (int(prev.pointer["total"]) if prev is not None else 0) + value, up, versions


# [END read_versions]


def run_epoch(ledger: EpochLedger, epoch: int, weather: dict[int, int]) -> None:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "weather", "w", {"value": weather[epoch]})
    total, up, versions = read_totals(ledger, epoch)
    ledger.vote(attempt, "totals", "t", {"value": total}, snapshot={"total": total}, upstream=up,
                read_versions=versions)


def pipeline(zk, name: str, weather: dict[int, int], epochs: int = EPOCHS) -> EpochLedger:
    ledger = EpochLedger(zk, name, owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS))
    for epoch in range(1, epochs + 1):
        run_epoch(ledger, epoch, weather)
    return ledger


def reproduce(ledger: EpochLedger) -> list[tuple[int, str]]:
    """The correction's producer: re-produce each pending re-seal, naming the versions it read."""
    done: list[tuple[int, str]] = []
    while pending := ledger.corrections.pending():
        for item in pending:
            assert item.partition == "totals", item
            total, up, versions = read_totals(ledger, item.epoch)
            ledger.corrections.vote_version(item.epoch, "totals", item.version, "t", {"value": total},
                                            snapshot={"total": total}, upstream=up, read_versions=versions)
            done.append((item.epoch, item.partition))
    return done


def correct_weather(ledger: EpochLedger) -> str:
    asked = ledger.corrections.reseal(3, "weather", reason="late weather feed for day 3", request_id="fix-3")
    assert ledger.corrections.vote_version(3, "weather", 2, "w", {"value": CORRECTED[3]}).sealed
    return asked.correction


def total(ledger: EpochLedger, epoch: int) -> int:
    view = ledger.corrections.sealed_version(epoch, "totals")
    assert view is not None, epoch
    return int(view.manifests["t"]["value"])


def assert_like_a_clean_run(zk, ledger: EpochLedger, name: str, epochs: int) -> None:
    clean = pipeline(zk, name, CORRECTED, epochs=epochs)
    assert [total(ledger, e) for e in range(1, epochs + 1)] == [total(clean, e) for e in range(1, epochs + 1)]


@pytest.mark.parametrize("read", ["corrected", "old", "unnamed"])
def test_a_seal_opened_before_a_reseal_is_judged_by_the_version_it_read(zk, read: str):
    ledger = pipeline(zk, f"race-{read}", WEATHER)
    cid = correct_weather(ledger)
    later = ledger.open_epoch(EPOCHS + 1)  # its attempt starts before every re-seal of the correction
    ledger.vote(later, "weather", "w", {"value": CORRECTED[EPOCHS + 1]})
    if read == "old":  # the producer read totals@6 version 1, then the correction re-sealed it
        early = read_totals(ledger, EPOCHS + 1)
        assert early[2][read_key(ledger.pipeline, "totals")] == 1
    assert reproduce(ledger) == PLAN
    (node,) = ledger.corrections.list()
    assert node.state == "marking"  # epoch 7 is open and started before the last re-seal: it may read the old one
    value, up, versions = early if read == "old" else read_totals(ledger, EPOCHS + 1)
    if read == "corrected":
        assert versions[read_key(ledger.pipeline, "totals")] == 2
    ledger.vote(later, "totals", "t", {"value": value}, snapshot={"total": value}, upstream=up,
                read_versions=None if read == "unnamed" else versions)
    sealed = ledger.seal_record(EPOCHS + 1, "totals")
    assert sealed is not None and dict(sealed.read_versions) == ({} if read == "unnamed" else versions)

    (node,) = ledger.corrections.resume()
    if read == "corrected":
        assert node.state == "done" and list(node.plan) == PLAN  # 4 re-runs, not 5
        assert ledger.corrections.versions(EPOCHS + 1, "totals") == ()
    else:
        assert node.state == "marking" and list(node.plan) == [*PLAN, (EPOCHS + 1, "totals")]
        assert reproduce(ledger) == [(EPOCHS + 1, "totals")]
        (node,) = ledger.corrections.list()
        assert node.state == "done"
        assert [v.version for v in ledger.corrections.versions(EPOCHS + 1, "totals")] == [2]
    assert node.id == cid
    assert_like_a_clean_run(zk, ledger, f"clean-{read}", EPOCHS + 1)


def test_the_race_run_concurrently_re_runs_exactly_the_old_reads(zk, zk_factory):
    """Epoch 7's producer runs in its own thread and session while the correction re-produces, reading
    at once or once the re-seal of totals@4, @5 or @6 has landed: wherever its read and its vote fall
    among the re-seals and the correction's last scan, its seal is in the plan exactly when it read
    version 1 of totals@6, and the correction finishes."""
    outcomes = []
    for after in (None, 4, 5, 6):
        ledger = pipeline(zk, f"threads-{after}", WEATHER)
        correct_weather(ledger)
        other = EpochLedger(zk_factory(), ledger.pipeline, owner="o")
        later = other.open_epoch(EPOCHS + 1)
        other.vote(later, "weather", "w", {"value": CORRECTED[EPOCHS + 1]})
        read: dict[str, int] = {}

        def producer(other: EpochLedger = other, later=later, read=read, after=after) -> None:
            while after is not None and other.corrections.sealed_version(after, "totals").version < 2:
                time.sleep(0.005)
            value, up, versions = read_totals(other, EPOCHS + 1)
            read.update(versions)
            other.vote(later, "totals", "t", {"value": value}, snapshot={"total": value}, upstream=up,
                       read_versions=versions)

        thread = threading.Thread(target=producer)
        thread.start()
        redone = reproduce(ledger)
        thread.join(timeout=60)
        assert not thread.is_alive()
        ledger.corrections.resume()  # epoch 7 sealed: the correction judges it, and finishes or appends it
        redone += reproduce(ledger)
        (node,) = ledger.corrections.list()
        old = read[read_key(ledger.pipeline, "totals")] == 1
        outcomes.append(old)
        assert node.state == "done", node
        assert list(node.plan) == [*PLAN, *([(EPOCHS + 1, "totals")] if old else [])]
        assert redone == list(node.plan)
        assert_like_a_clean_run(zk, ledger, f"clean-threads-{after}", EPOCHS + 1)
    assert outcomes[-1] is False  # read after totals@6 v2 sealed: never re-run
    print("epoch 7 read the old totals@6 (read at once, after @4, @5, @6):", outcomes)


def test_several_producers_count_the_oldest_version_read_and_ballots_carry_it(zk):
    ledger = EpochLedger(zk, "pair", owner="o")
    ledger.create_pipeline(PipelineConfig({"weather": ("w",), "report": ("a", "b")}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "weather", "w", {"value": 1})
    key = read_key("pair", "weather")
    ledger.vote(attempt, "report", "a", {}, upstream={key: 1}, read_versions={key: 2})
    [result] = ledger.vote_many(attempt, [Ballot("report", "b", {}, upstream={key: 1}, read_versions={key: 1})])
    assert result.partition_sealed
    sealed = ledger.seal_record(1, "report")
    assert sealed is not None and dict(sealed.read_versions) == {key: 1}
    # a producer that names no version makes the seal name none for that key (judged by when it read)
    attempt = ledger.open_epoch(2)
    ledger.vote(attempt, "weather", "w", {"value": 2})
    ledger.vote(attempt, "report", "a", {}, upstream={key: 2}, read_versions={key: 1})
    ledger.vote(attempt, "report", "b", {}, upstream={key: 2})
    sealed = ledger.seal_record(2, "report")
    assert sealed is not None and dict(sealed.read_versions) == {}


@pytest.mark.parametrize(("versions", "message"), [
    ({"bad:weather": 1}, r"read_versions names 'bad:weather', which upstream does not name"),
    ({"other": 1}, r"read_versions names 'other', not a partition of pipeline 'refuse'"),
    ({"refuse:weather": 0}, r"read_versions\['refuse:weather'\] must be a version number in 1\.\.1000000, not 0"),
    ({"refuse:weather": True}, r"read_versions\['refuse:weather'\] must be a version number .*, not True"),
    ({"refuse:weather": "2"}, r"read_versions\['refuse:weather'\] must be a version number .*, not '2'"),
    (["refuse:weather"], r"read_versions must map lineage keys to version numbers, not list"),
])
def test_bad_read_versions_are_refused_before_any_write(zk, versions, message):
    ledger = EpochLedger(zk, "refuse", owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "weather", "w", {"value": 1})
    up = {"refuse:weather": 1, "other": 1}
    before = tree(zk, ledger.paths.base)
    with pytest.raises(InvalidInput, match=message):
        ledger.vote(attempt, "totals", "t", {"value": 1}, upstream=up, read_versions=versions)
    with pytest.raises(InvalidInput, match=message):
        ledger.vote_many(attempt, [Ballot("totals", "t", {"value": 1}, upstream=up, read_versions=versions)])
    assert tree(zk, ledger.paths.base) == before
    ledger.vote(attempt, "totals", "t", {"value": 1}, snapshot={"total": 1}, upstream={"refuse:weather": 1})
    ledger.corrections.reseal(1, "weather", reason="late")
    ledger.corrections.vote_version(1, "weather", 2, "w", {"value": 2})
    (pending,) = ledger.corrections.pending()
    before = tree(zk, ledger.paths.base)
    with pytest.raises(InvalidInput, match=message):
        ledger.corrections.vote_version(1, "totals", pending.version, "t", {"value": 2}, upstream=up,
                                        read_versions=versions)
    assert tree(zk, ledger.paths.base) == before


def test_a_seal_made_between_the_finishing_scans_two_reads_is_judged_not_missed(zk, zk_factory, monkeypatch):
    """The interleaving injected: the correction's last scan reads epoch 7's seals (none yet), then epoch 7
    seals (its producer read the old totals@6), then the scan asks whether epoch 7 is still open. It is
    not, and the seal it did not see is read again and judged stale, where before the correction ended
    without it."""
    ledger = pipeline(zk, "between", WEATHER)
    correct_weather(ledger)
    other = EpochLedger(zk_factory(), ledger.pipeline, owner="o")
    later = other.open_epoch(EPOCHS + 1)
    other.vote(later, "weather", "w", {"value": CORRECTED[EPOCHS + 1]})
    value, up, versions = read_totals(other, EPOCHS + 1)  # version 1 of totals@6
    armed = []
    original = invalidation.lineages_at

    def lineages_then_seal(call, ctx, epoch, partitions):
        found = original(call, ctx, epoch, partitions)
        if armed and epoch == EPOCHS + 1:
            armed.clear()
            assert found["totals"] is None
            other.vote(later, "totals", "t", {"value": value}, snapshot={"total": value}, upstream=up,
                       read_versions=versions)
        return found

    monkeypatch.setattr(invalidation, "lineages_at", lineages_then_seal)
    redone = []
    while pending := ledger.corrections.pending():
        for item in pending:
            if item.epoch == EPOCHS:  # the last planned re-seal: its vote runs the finishing scan
                armed.append(True)
            total_now, up_now, versions_now = read_totals(ledger, item.epoch)
            ledger.corrections.vote_version(item.epoch, "totals", item.version, "t", {"value": total_now},
                                            snapshot={"total": total_now}, upstream=up_now,
                                            read_versions=versions_now)
            redone.append((item.epoch, item.partition))
    assert not armed  # the injected seal happened
    (node,) = ledger.corrections.list()
    assert redone == [*PLAN, (EPOCHS + 1, "totals")] and list(node.plan) == redone
    assert node.state == "done"
    assert_like_a_clean_run(zk, ledger, "clean-between", EPOCHS + 1)
