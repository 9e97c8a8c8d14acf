"""Re-seal a partition of a past epoch as a new version, and re-run exactly what read it (real ZooKeeper).

The pipeline has the shape of nycflights: ``weather`` and ``flights`` are inputs, ``joined`` reads both
at the same epoch, ``totals`` reads ``joined`` and its own snapshot of the epoch before (running
totals). Every producer names what it read in its lineage vector (``read_key``). Correcting ``weather``
at epoch 8 of 20 must re-seal ``weather``@8, ``joined``@8 and ``totals``@8..20, nothing else, and end
with every figure equal to a clean run over the corrected input; the frontier never moves back.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from zk_helpers import tree
from zk_proxy import LostAnswerProxy

from airflow_epochs.coordination import EpochLedger, InvalidInput, PipelineConfig
from airflow_epochs.coordination.recipes.corrections import reseal as reseal_protocol
from airflow_epochs.coordination.recipes.corrections.errors import (
    InputsNotResealed,
    ResealCompacted,
    ResealInFlight,
    ResealNotSealed,
    ResealUnknownPartition,
    VersionNotOpen,
)
from airflow_epochs.coordination.recipes.corrections.records import read_key
from airflow_epochs.views.status import pipeline_status, render

pytestmark = [pytest.mark.integration]

RESEAL_WORKER = Path(__file__).resolve().parents[2] / "helpers" / "reseal_worker.py"
PARTITIONS = {"weather": ("w",), "flights": ("f",), "joined": ("j",), "totals": ("t",)}
EPOCHS = 20
FLIGHTS = {e: 100 + e for e in range(1, 40)}
WEATHER = {e: 10 * e for e in range(1, 40)}
CORRECTED = {**WEATHER, 8: 10 * 8 + 7}
EXPECTED = [(8, "joined"), *((e, "totals") for e in range(8, EPOCHS + 1))]


def value(ledger: EpochLedger, epoch: int, partition: str) -> int:
    view = ledger.corrections.sealed_version(epoch, partition)
    assert view is not None, (epoch, partition)
    return int(next(iter(view.manifests.values()))["value"])


# [START producers]
def joined(ledger: EpochLedger, epoch: int) -> tuple[dict[str, int], dict[str, int]]:
    """The ``joined`` producer: reads the newest versions of weather and flights at ``epoch``."""
    got = value(ledger, epoch, "weather") * value(ledger, epoch, "flights")
    up = {read_key(ledger.pipeline, "weather"): epoch, read_key(ledger.pipeline, "flights"): epoch}
    return {"value": got}, up


def totals(ledger: EpochLedger, epoch: int) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """The running totals: the snapshot the epoch before left (its newest version), plus ``joined``."""
    prev = ledger.last_sealed_snapshot("totals", before_epoch=epoch, producer="t")
    total = (int(prev.pointer["total"]) if prev is not None else 0) + value(ledger, epoch, "joined")
    up = {read_key(ledger.pipeline, "joined"): epoch}
    if prev is not None:
        up[read_key(ledger.pipeline, "totals")] = prev.epoch
    return {"value": total}, {"total": total}, up


# [END producers]


def run_epoch(ledger: EpochLedger, epoch: int, weather: dict[int, int]) -> None:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "weather", "w", {"value": weather[epoch]})
    ledger.vote(attempt, "flights", "f", {"value": FLIGHTS[epoch]})
    manifest, up = joined(ledger, epoch)
    ledger.vote(attempt, "joined", "j", manifest, upstream=up)
    manifest, snap, up = totals(ledger, epoch)
    ledger.vote(attempt, "totals", "t", manifest, snapshot=snap, upstream=up)


def pipeline(zk, name: str, weather: dict[int, int], epochs: int = EPOCHS, **config) -> EpochLedger:
    ledger = EpochLedger(zk, name, owner="o")
    ledger.create_pipeline(PipelineConfig(PARTITIONS, **config))
    for epoch in range(1, epochs + 1):
        run_epoch(ledger, epoch, weather)
    return ledger


# [START reproduce]
def reproduce(ledger: EpochLedger, weather: dict[int, int]) -> list[tuple[int, str]]:
    """What a correction's producers do: re-produce each pending re-seal, in the order it is asked for."""
    done: list[tuple[int, str]] = []
    while pending := ledger.corrections.pending():
        for item in pending:
            e, p = item.epoch, item.partition
            if p == "joined":
                manifest, up = joined(ledger, e)
                ledger.corrections.vote_version(e, p, item.version, "j", manifest, upstream=up)
            else:
                assert p == "totals", item
                manifest, snap, up = totals(ledger, e)
                ledger.corrections.vote_version(e, p, item.version, "t", manifest, snapshot=snap, upstream=up)
            done.append((e, p))
    return done


def correct_weather(ledger: EpochLedger, request_id: str = "fix-8") -> str:
    asked = ledger.corrections.reseal(8, "weather", reason="late weather feed for day 8", request_id=request_id)
    assert (asked.version, asked.state) == (2, "open")
    assert ledger.corrections.vote_version(8, "weather", 2, "w", {"value": CORRECTED[8]}).sealed
    return asked.correction
# [END reproduce]


def events(ledger: EpochLedger, kind: str) -> list[dict]:
    return [dict(e.detail) for e in ledger.history() if e.event == kind]


def test_a_correction_reseals_exactly_what_read_it(zk):
    ledger = pipeline(zk, "nyc", WEATHER)
    before_totals = {e: value(ledger, e, "totals") for e in range(1, EPOCHS + 1)}
    cid = correct_weather(ledger)
    assert ledger.frontier() == EPOCHS  # never moved back
    (correction,) = ledger.corrections.list()
    assert correction.id == cid and correction.state == "marking"
    assert list(correction.plan) == EXPECTED

    # the stale seals say so, naming the correction, before they are re-produced
    stale = ledger.corrections.sealed_version(12, "totals")
    assert stale is not None and stale.version == 1 and stale.stale_by == cid and stale.resealed_at is None

    shown = render(pipeline_status(ledger, recent=EPOCHS))
    assert "weather at epoch 8 v2: marking, 14 stale seal(s); waiting for joined at epoch 8 v2" in shown
    sealed_at_8 = {line.split()[4]: line.split()[-2] for line in shown.splitlines() if line.split()[:1] == ["8"]}
    assert sealed_at_8 == {"weather": "v2", "flights": "yes", "joined": "yes", "totals": "yes"}

    redone = reproduce(ledger, CORRECTED)
    assert redone == EXPECTED  # each once, in epoch order
    shown = render(pipeline_status(ledger, recent=EPOCHS))
    assert "corrections" not in shown and shown.count(" yes v2 ") == 1 + len(EXPECTED)
    (correction,) = ledger.corrections.list()
    assert correction.state == "done"
    assert ledger.frontier() == EPOCHS

    clean = pipeline(zk, "clean", CORRECTED)
    for epoch in range(1, EPOCHS + 1):
        for partition in PARTITIONS:
            assert value(ledger, epoch, partition) == value(clean, epoch, partition), (epoch, partition)
            versions = ledger.corrections.versions(epoch, partition)
            touched = (epoch, partition) in [(8, "weather"), *EXPECTED]
            assert [v.version for v in versions] == ([2] if touched else []), (epoch, partition)
    # the old seals are kept as they were, and say which correction superseded them and when it landed
    old = ledger.corrections.sealed_version(8, "weather", 1)
    assert old is not None and old.manifests["w"]["value"] == WEATHER[8] and old.stale_by == cid
    assert old.resealed_at is not None
    assert value(ledger, 7, "totals") == before_totals[7]
    assert ledger.corrections.sealed_version(20, "totals", 1).manifests["t"]["value"] == before_totals[20]
    newest = ledger.corrections.sealed_version(20, "totals")
    assert newest.version == 2 and newest.latest == 2 and not newest.stale and newest.correction == cid
    # the history records it: one opening per re-seal, one seal per version, one plan, one done
    assert len(events(ledger, "reseal_opened")) == 1 + len(EXPECTED)
    assert len(events(ledger, "version_sealed")) == 1 + len(EXPECTED)
    assert len(events(ledger, "correction_done")) == 1


def test_a_new_epoch_during_a_correction_proceeds_and_is_re_produced(zk):
    """Epoch 21 opens and seals while the correction waits for its producers: it reads the stale
    snapshot of epoch 20 (nothing blocks it), and the correction appends it when it finishes."""
    ledger = pipeline(zk, "live", WEATHER)
    correct_weather(ledger)
    run_epoch(ledger, EPOCHS + 1, CORRECTED)
    assert ledger.frontier() == EPOCHS + 1
    redone = reproduce(ledger, CORRECTED)
    assert redone == [*EXPECTED, (EPOCHS + 1, "totals")]
    (correction,) = ledger.corrections.list()
    assert correction.state == "done"
    clean = pipeline(zk, "clean21", CORRECTED, epochs=EPOCHS + 1)
    assert value(ledger, EPOCHS + 1, "totals") == value(clean, EPOCHS + 1, "totals")
    # epoch 22 opened after the correction reads the corrected snapshot: nothing more to redo
    run_epoch(ledger, EPOCHS + 2, CORRECTED)
    assert ledger.corrections.resume() == [] and ledger.corrections.pending() == []


def test_refusals_write_nothing(zk):
    ledger = pipeline(zk, "refuse", WEATHER, epochs=6, retain_epochs=3)
    assert ledger.compact().through == 3
    ledger.open_epoch(7)
    before = tree(zk, ledger.paths.base)
    with pytest.raises(ResealNotSealed, match=r"epoch 7 is not sealed yet.*nothing was written"):
        ledger.corrections.reseal(7, "weather", reason="x")
    with pytest.raises(ResealNotSealed):
        ledger.corrections.reseal(30, "weather", reason="x")
    with pytest.raises(ResealUnknownPartition, match=r"'rain' is not configured at epoch 5"):
        ledger.corrections.reseal(5, "rain", reason="x")
    with pytest.raises(ResealCompacted, match=r"epoch 2 is compacted"):
        ledger.corrections.reseal(2, "weather", reason="x")
    with pytest.raises(InvalidInput, match="needs a reason"):
        ledger.corrections.reseal(5, "weather", reason=" ")
    with pytest.raises(VersionNotOpen, match="never opened"):
        ledger.corrections.vote_version(5, "weather", 2, "w", {"value": 1})
    assert tree(zk, ledger.paths.base) == before

    ledger.corrections.reseal(5, "weather", reason="first", request_id="r1")
    before = tree(zk, ledger.paths.base)
    with pytest.raises(ResealInFlight, match=r"version 2 of 'weather' at epoch 5 is being re-sealed"):
        ledger.corrections.reseal(5, "weather", reason="second", request_id="r2")
    with pytest.raises(VersionNotOpen):
        ledger.corrections.vote_version(5, "weather", 3, "w", {"value": 1})
    assert tree(zk, ledger.paths.base) == before

    # Version 2 sealed, its correction still re-producing what read it: a second request is still refused
    # (it would re-produce the same seals again); the first request's repeat answers.
    assert ledger.corrections.vote_version(5, "weather", 2, "w", {"value": 1}).sealed
    (correction,) = ledger.corrections.list()
    assert correction.state == "marking" and ledger.corrections.pending()
    before = tree(zk, ledger.paths.base)
    with pytest.raises(ResealInFlight, match=r"version 2 of 'weather' at epoch 5 is sealed, and its correction "
                                             r"\S+ \(request 'r1'\) is still re-producing"):
        ledger.corrections.reseal(5, "weather", reason="second", request_id="r2")
    assert tree(zk, ledger.paths.base) == before
    assert ledger.corrections.reseal(5, "weather", reason="first", request_id="r1").state == "sealed"


def test_repeats_and_lost_replies_apply_once(zk, lossy, proxy: LostAnswerProxy):
    pipeline(zk, "lost", WEATHER, epochs=9)
    ledger = EpochLedger(lossy, "lost", owner="o")
    proxy.drop_next_committed_write(1)
    dropped = len(proxy.dropped)
    first = ledger.corrections.reseal(8, "weather", reason="late feed", request_id="fix")
    assert len(proxy.dropped) == dropped + 1  # the answer was lost; ZooKeeper was asked
    assert ledger.corrections.reseal(8, "weather", reason="late feed", request_id="fix") == first
    proxy.drop_next_committed_write(1)
    assert ledger.corrections.vote_version(8, "weather", 2, "w", {"value": 87}, request_id="v").sealed
    assert ledger.corrections.vote_version(8, "weather", 2, "w", {"value": 87}, request_id="v").sealed
    # a repeat of the re-seal after it sealed answers with it, sealed; it opens nothing
    again = ledger.corrections.reseal(8, "weather", reason="late feed", request_id="fix")
    assert (again.version, again.state) == (2, "sealed")
    assert [v.version for v in ledger.corrections.versions(8, "weather")] == [2]
    assert len(events(ledger, "reseal_opened")) == 1 + 3  # joined@8, totals@8 and @9
    # a vote out of order (totals@9 before totals@8) is refused
    (correction,) = ledger.corrections.list()
    with pytest.raises(InputsNotResealed, match="not re-sealed yet"):
        ledger.corrections.vote_version(9, "totals", 2, "t", {"value": 0})
    assert correction.plan == ((8, "joined"), (8, "totals"), (9, "totals"))
    # Another request while that correction re-produces: refused; once it is done, it opens version 3.
    with pytest.raises(ResealInFlight, match="is still re-producing the seals that read it"):
        ledger.corrections.reseal(8, "weather", reason="again", request_id="fix-2")
    reproduce(ledger, WEATHER)
    assert ledger.corrections.list()[0].state == "done"
    assert ledger.corrections.reseal(8, "weather", reason="again", request_id="fix-2").version == 3


def test_two_concurrent_reseal_requests_give_one_reseal(zk, zk_factory):
    pipeline(zk, "race", WEATHER, epochs=9)
    start = threading.Barrier(2)
    answers: list[object] = []

    def request(name: str) -> None:
        ledger = EpochLedger(zk_factory(), "race", owner=name)
        start.wait()
        try:
            answers.append(ledger.corrections.reseal(8, "weather", reason=name, request_id=name))
        except ResealInFlight as exc:
            answers.append(exc)

    threads = [threading.Thread(target=request, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(type(a).__name__ for a in answers) == ["Reseal", "ResealInFlight"]
    ledger = EpochLedger(zk, "race")
    assert [v.version for v in ledger.corrections.versions(8, "weather")] == [2]
    assert len(events(ledger, "reseal_opened")) == 1


def test_a_kill_9_mid_invalidation_resumes_and_finishes_once(zk, zk_server, zk_chroot):
    ledger = pipeline(zk, "killed", WEATHER)
    asked = ledger.corrections.reseal(8, "weather", reason="late feed")
    # seal the origin without advancing its correction: the killed worker is the first to advance it
    assert reseal_protocol.vote_version(ledger.ctx, 8, "weather", 2, "w", {"value": CORRECTED[8]}).sealed
    (correction,) = ledger.corrections.list()
    assert correction.state == "planning"
    worker = subprocess.run([sys.executable, str(RESEAL_WORKER), zk_server.address + zk_chroot, "killed", "4"],
                            capture_output=True, text=True, timeout=120, env=zk_server.env())
    assert worker.returncode == -9, (worker.returncode, worker.stdout, worker.stderr[-2000:])
    assert "OPENED 4" in worker.stdout and "NOT KILLED" not in worker.stdout
    (correction,) = ledger.corrections.list()
    assert correction.state == "marking" and list(correction.plan) == EXPECTED
    assert sum(1 for e, p in EXPECTED if ledger.corrections.versions(e, p)) == 4  # killed with 4 of 14 marked

    ledger.corrections.resume()
    assert reproduce(ledger, CORRECTED) == EXPECTED
    for epoch, partition in EXPECTED:
        versions = ledger.corrections.versions(epoch, partition)
        assert [(v.version, v.correction) for v in versions] == [(2, asked.correction)]
    assert len(events(ledger, "reseal_opened")) == 1 + len(EXPECTED)
    assert len(events(ledger, "correction_planned")) == 1
    assert len(events(ledger, "correction_done")) == 1
    clean = pipeline(zk, "clean-k", CORRECTED)
    assert value(ledger, EPOCHS, "totals") == value(clean, EPOCHS, "totals")


def test_versions_of_a_rolled_back_opening_are_history(zk):
    """A rollback re-opens the epoch as a new generation: its new seal is version 1 again, readers never
    serve the old opening's re-seal, a vote under it is refused, and a new re-seal numbers on after it."""
    ledger = pipeline(zk, "undo", WEATHER, epochs=6)
    asked = ledger.corrections.reseal(5, "weather", reason="late")
    ledger.corrections.vote_version(5, "weather", asked.version, "w", {"value": 555})
    ledger.corrections.advance(asked.correction)
    assert value(ledger, 5, "weather") == 555
    opened = ledger.corrections.pending()
    assert [(p.epoch, p.partition) for p in opened] == [(5, "joined")]

    assert ledger.rollback(4, reason="redo 5 and 6") == [5, 6]
    with pytest.raises(VersionNotOpen, match="rolled back"):
        ledger.corrections.vote_version(5, "joined", opened[0].version, "j", {"value": 1})
    assert ledger.corrections.pending() == []
    assert [c.state for c in ledger.corrections.resume()] == ["rolled_back"]
    for epoch in (5, 6):
        run_epoch(ledger, epoch, WEATHER)
    fresh = ledger.corrections.sealed_version(5, "weather")
    assert fresh is not None and fresh.version == 1 and not fresh.stale and fresh.manifests["w"]["value"] == 50
    assert value(ledger, 6, "totals") == value(pipeline(zk, "undo-clean", WEATHER, epochs=6), 6, "totals")
    again = ledger.corrections.reseal(5, "weather", reason="late again")
    assert again.version == 3  # version 2 stays the rolled-back opening's
    ledger.corrections.vote_version(5, "weather", 3, "w", {"value": 57})
    assert ledger.corrections.sealed_version(5, "weather").version == 3
    assert ledger.corrections.sealed_version(5, "weather", 1).stale_by == again.correction


def test_lost_answers_while_a_correction_advances_apply_each_step_once(zk, lossy, proxy: LostAnswerProxy):
    """The plan's write and the openings of stale seals' versions lose their answers: each step is found in
    ZooKeeper (or found done when decided again), and nothing is applied twice."""
    pipeline(zk, "lost-steps", WEATHER, epochs=12)
    ledger = EpochLedger(lossy, "lost-steps", owner="o")
    asked = ledger.corrections.reseal(8, "weather", reason="late feed")
    assert reseal_protocol.vote_version(ledger.ctx, 8, "weather", 2, "w", {"value": CORRECTED[8]}).sealed
    dropped = len(proxy.dropped)
    proxy.drop_next_committed_write(3)
    node = ledger.corrections.advance(asked.correction)
    assert len(proxy.dropped) == dropped + 3
    plan = [(8, "joined"), *((e, "totals") for e in range(8, 13))]
    assert node.state == "marking" and list(node.plan) == plan
    assert len(events(ledger, "correction_planned")) == 1
    assert len(events(ledger, "reseal_opened")) == 1 + len(plan)
    assert reproduce(ledger, CORRECTED) == plan
    assert [c.state for c in ledger.corrections.list()] == ["done"]


def test_epoch_21_opened_before_the_reseals_that_read_the_corrected_totals_is_not_re_run(zk):
    """Issue 47's race on this shape: epoch 21 opens before ``totals``@20 is re-sealed and its producers
    vote after it, naming the versions they read (``read_versions``): 15 re-seals (``weather``@8 and the
    14 stale seals), not 16; epoch 21's seal stays version 1 and its figures equal a clean run."""
    ledger = pipeline(zk, "race21", WEATHER)
    correct_weather(ledger)
    attempt = ledger.open_epoch(EPOCHS + 1)
    ledger.vote(attempt, "weather", "w", {"value": CORRECTED[EPOCHS + 1]})
    ledger.vote(attempt, "flights", "f", {"value": FLIGHTS[EPOCHS + 1]})
    assert reproduce(ledger, CORRECTED) == EXPECTED
    assert ledger.corrections.list()[0].state == "marking"  # epoch 21 is open, and older than the re-seals
    w, f = (ledger.corrections.sealed_version(EPOCHS + 1, p) for p in ("weather", "flights"))
    up = {read_key("race21", "weather"): EPOCHS + 1, read_key("race21", "flights"): EPOCHS + 1}
    ledger.vote(attempt, "joined", "j", {"value": w.manifests["w"]["value"] * f.manifests["f"]["value"]},
                upstream=up, read_versions={read_key("race21", "weather"): w.version,
                                            read_key("race21", "flights"): f.version})
    prev = ledger.last_sealed_snapshot("totals", before_epoch=EPOCHS + 1, producer="t")
    day = ledger.corrections.sealed_version(EPOCHS + 1, "joined")
    assert prev.version == 2  # the corrected running total of epoch 20
    total = int(prev.pointer["total"]) + int(day.manifests["j"]["value"])
    ledger.vote(attempt, "totals", "t", {"value": total}, snapshot={"total": total},
                upstream={read_key("race21", "joined"): EPOCHS + 1, read_key("race21", "totals"): EPOCHS},
                read_versions={read_key("race21", "joined"): day.version, read_key("race21", "totals"): prev.version})
    (correction,) = ledger.corrections.resume()
    assert correction.state == "done" and list(correction.plan) == EXPECTED
    assert len(events(ledger, "version_sealed")) == 1 + len(EXPECTED) == 15
    assert ledger.corrections.versions(EPOCHS + 1, "totals") == ()
    clean = pipeline(zk, "clean-race21", CORRECTED, epochs=EPOCHS + 1)
    assert value(ledger, EPOCHS + 1, "totals") == value(clean, EPOCHS + 1, "totals")
