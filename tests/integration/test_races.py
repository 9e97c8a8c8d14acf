"""Races: 8 threads and 4 processes contend for the same epoch, seal and leadership; exactly one wins
each time, and every loser gets a specific error."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
import race_workers

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _hosts(zk_server, zk_chroot):
    return zk_server.settings(zk_chroot)


def _run(kind, n, fn, args_for):
    if kind == "threads":
        barrier = threading.Barrier(n)
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(lambda i: fn(*args_for(i), barrier), range(n)))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n)
        with ProcessPoolExecutor(n, mp_context=ctx) as pool:
            futures = [pool.submit(fn, *args_for(i), barrier) for i in range(n)]
            return [f.result(timeout=120) for f in futures]


@pytest.fixture(params=[("threads", 8), ("processes", 4)], ids=["8-threads", "4-processes"])
def contenders(request):
    return request.param


def test_one_opener_wins(zk, zk_server, zk_chroot, contenders):
    kind, n = contenders
    EpochLedger(zk, "race", owner="setup").create_pipeline(PipelineConfig({"out": ("job",)}))
    results = _run(kind, n, race_workers.open_epoch,
                   lambda i: (_hosts(zk_server, zk_chroot), "race", f"owner{i}"))
    assert sorted(results) == ["EpochAlreadyOpen"] * (n - 1) + ["won:1"], results


def test_one_attempt_seals_under_takeover_storm(zk, zk_server, zk_chroot, contenders):
    kind, n = contenders
    ledger = EpochLedger(zk, "race", owner="setup")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    ledger.open_epoch(1)
    results = _run(kind, n, race_workers.takeover_and_seal,
                   lambda i: (_hosts(zk_server, zk_chroot), "race", f"owner{i}"))
    winners = [r for r in results if r.startswith("sealed:")]
    assert len(winners) == 1, results
    assert set(results) - set(winners) <= {"AttemptSuperseded", "EpochAlreadySealed"}, results
    seal = ledger.seal(1, "out")
    assert seal.attempt == int(winners[0].split(":")[1])
    assert ledger.frontier() == 1
    assert [e.event for e in ledger.history()].count("partition_sealed") == 1


def test_one_manifest_seals_for_one_attempt(zk, zk_server, zk_chroot, contenders):
    kind, n = contenders
    ledger = EpochLedger(zk, "race", owner="setup")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    attempt = ledger.open_epoch(1).to_dict()
    results = _run(kind, n, race_workers.vote_same_attempt,
                   lambda i: (_hosts(zk_server, zk_chroot), attempt, f"owner{i}"))
    assert sorted(results) == ["DuplicateVote"] * (n - 1) + ["sealed"], results
    winner = ledger.seal(1, "out").manifests["job"]["by"]
    assert winner.startswith("owner")


def test_one_leader(zk, zk_server, zk_chroot, contenders):
    kind, n = contenders
    EpochLedger(zk, "race", owner="setup").create_pipeline(PipelineConfig({"out": ("job",)}))
    results = _run(kind, n, race_workers.lease, lambda i: (_hosts(zk_server, zk_chroot), "race", f"owner{i}"))
    assert sorted(results) == ["NotLeader"] * (n - 1) + ["leader"], results
    holder = EpochLedger(zk, "race", owner="observer").lease().holder()
    assert holder is not None and holder.owner.startswith("owner")
