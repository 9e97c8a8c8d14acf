"""Correcting one input partition of a past epoch: a re-seal beside a rollback, same pipeline, same run.

The pipeline has the nycflights shape (``weather`` and ``flights`` in, ``joined`` reads both, running
``totals`` read ``joined`` and their own snapshot of the epoch before), 20 epochs; the weather of epoch
8 arrives corrected. Ours: ``reseal(8, "weather")`` and re-produce what the correction asks for. The
peer, today's only tool: ``rollback(to_epoch=7)`` and run epochs 8-20 again. Both end with the same
figures (checked); the producers here write no data, so the seconds are the coordination's, and the
seals re-produced are what a real pipeline would recompute.
"""

from __future__ import annotations

import itertools
import time

from common import alternate, client, compare

from airflow_epochs.coordination import EpochLedger, PipelineConfig, read_key

PARTITIONS = {"weather": ("w",), "flights": ("f",), "joined": ("j",), "totals": ("t",)}
CORRECTED_EPOCH = 8
_names = itertools.count()


def _value(ledger: EpochLedger, epoch: int, partition: str) -> int:
    view = ledger.corrections.sealed_version(epoch, partition)
    assert view is not None
    return int(next(iter(view.manifests.values()))["value"])


def _joined(ledger: EpochLedger, epoch: int) -> tuple[dict[str, int], dict[str, int]]:
    up = {read_key(ledger.pipeline, "weather"): epoch, read_key(ledger.pipeline, "flights"): epoch}
    return {"value": _value(ledger, epoch, "weather") * _value(ledger, epoch, "flights")}, up


def _totals(ledger: EpochLedger, epoch: int) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    prev = ledger.last_sealed_snapshot("totals", before_epoch=epoch, producer="t")
    total = (int(prev.pointer["total"]) if prev is not None else 0) + _value(ledger, epoch, "joined")
    up = {read_key(ledger.pipeline, "joined"): epoch}
    if prev is not None:
        up[read_key(ledger.pipeline, "totals")] = prev.epoch
    return {"value": total}, {"total": total}, up


def _run_epoch(ledger: EpochLedger, epoch: int, weather: dict[int, int]) -> int:
    attempt = ledger.open_epoch(epoch)
    ledger.vote(attempt, "weather", "w", {"value": weather[epoch]})
    ledger.vote(attempt, "flights", "f", {"value": 100 + epoch})
    manifest, up = _joined(ledger, epoch)
    ledger.vote(attempt, "joined", "j", manifest, upstream=up)
    manifest, snap, up = _totals(ledger, epoch)
    ledger.vote(attempt, "totals", "t", manifest, snapshot=snap, upstream=up)
    return len(PARTITIONS)


def _pipeline(hosts: str, epochs: int, weather: dict[int, int]) -> EpochLedger:
    ledger = EpochLedger(client(hosts), f"reseal-bench-{next(_names)}", owner="bench")
    ledger.create_pipeline(PipelineConfig(PARTITIONS))
    for epoch in range(1, epochs + 1):
        _run_epoch(ledger, epoch, weather)
    return ledger


def _close(ledger: EpochLedger) -> None:
    ledger.client.stop()
    ledger.client.close()


def run(hosts: str, epochs: int, repeats: int) -> None:
    weather = {e: 10 * e for e in range(1, epochs + 1)}
    corrected = {**weather, CORRECTED_EPOCH: weather[CORRECTED_EPOCH] + 7}
    clean = _pipeline(hosts, epochs, corrected)
    expected = _value(clean, epochs, "totals")
    _close(clean)
    seals = {"ours": 0, "peer": 0}

    def ours() -> float:
        ledger = _pipeline(hosts, epochs, weather)
        started = time.perf_counter()
        asked = ledger.corrections.reseal(CORRECTED_EPOCH, "weather", reason="corrected weather feed")
        ledger.corrections.vote_version(CORRECTED_EPOCH, "weather", asked.version, "w",
                                        {"value": corrected[CORRECTED_EPOCH]})
        redone = 1
        while pending := ledger.corrections.pending():
            for item in pending:
                if item.partition == "joined":
                    manifest, up = _joined(ledger, item.epoch)
                    ledger.corrections.vote_version(item.epoch, "joined", item.version, "j", manifest, upstream=up)
                else:
                    manifest, snap, up = _totals(ledger, item.epoch)
                    ledger.corrections.vote_version(item.epoch, "totals", item.version, "t", manifest, snapshot=snap,
                                        upstream=up)
                redone += 1
        took = time.perf_counter() - started
        assert _value(ledger, epochs, "totals") == expected and ledger.frontier() == epochs
        seals["ours"] = redone
        _close(ledger)
        return took

    def peer() -> float:
        ledger = _pipeline(hosts, epochs, weather)
        started = time.perf_counter()
        ledger.rollback(CORRECTED_EPOCH - 1, reason="corrected weather feed")
        redone = sum(_run_epoch(ledger, epoch, corrected) for epoch in range(CORRECTED_EPOCH, epochs + 1))
        took = time.perf_counter() - started
        assert _value(ledger, epochs, "totals") == expected
        seals["peer"] = redone
        _close(ledger)
        return took

    mine, theirs = alternate(repeats, ours, peer)
    compare("reseal_rerun_seals", "reseal", f"seals re-produced to correct one input at epoch {CORRECTED_EPOCH} of "
            f"{epochs}", [float(seals["ours"])], [float(seals["peer"])], "seals", "rollback + re-run",
            note="the same every run: the correction re-produces what read the input, the rollback every later "
                 "seal of every partition")
    compare("reseal_seconds", "reseal", f"time to correct one input at epoch {CORRECTED_EPOCH} of {epochs} "
            "(coordination only, no data written)", mine, theirs, "s", "rollback + re-run")
