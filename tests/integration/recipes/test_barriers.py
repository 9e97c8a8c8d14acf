"""Barriers on a real ZooKeeper: many participants in threads and processes, O(1) writes per arrival,
one release watch per waiter, and every straggler policy with a participant frozen past the timeout."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import barrier_workers
import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig, PipelinePaths
from airflow_epochs.coordination.recipes.barriers.barrier import (
    MAX_LATE_NAMED,
    BarrierClosed,
    BarrierConflict,
    BarrierFailed,
    StragglerPolicy,
    UnknownParticipant,
)
from airflow_epochs.coordination.wire import payloads
from airflow_epochs.coordination.wire.payloads import MAX_PAYLOAD_BYTES

pytestmark = [pytest.mark.integration]


@pytest.fixture
def epoch_open(zk):
    ledger = EpochLedger(zk, "bar", owner="coordinator")
    ledger.create_pipeline(PipelineConfig({"out": ("join",)}, barriers={"ingested": ("flights", "weather")}))
    ledger.open_epoch(1)
    return ledger


def test_participants_from_config_and_dynamic_registration(zk, epoch_open):
    barrier = EpochLedger(zk, "bar").barrier(1, "ingested")
    barrier.declare(StragglerPolicy.fail(timeout=30))
    barrier.declare(StragglerPolicy.fail(timeout=30))  # idempotent
    with pytest.raises(BarrierConflict):
        barrier.declare(StragglerPolicy.rerun(timeout=30))
    barrier.register("planes")  # a third producer decided at run time
    with pytest.raises(UnknownParticipant, match="'hotels'"):
        barrier.arrive("hotels")
    assert not barrier.arrive("flights").released
    assert not barrier.arrive("weather").released
    assert barrier.outcome() is None
    last = barrier.arrive("planes")
    assert last.released and last.index == 3
    outcome = barrier.wait(timeout=5)
    assert (outcome.decision, outcome.late) == ("all", ())
    with pytest.raises(BarrierClosed):
        barrier.register("late-comer")
    assert barrier.arrive("planes").index == 0  # a repeat arrival changes nothing




@pytest.mark.slow
def test_200_threads_nobody_passes_early_and_arrivals_cost_o1_writes(zk_factory, zk, epoch_open):
    n = 200
    names = [f"t{i:03d}" for i in range(n)]
    EpochLedger(zk, "bar").barrier(1, "big").declare(StragglerPolicy.fail(timeout=120), names)
    clients = [zk_factory() for _ in range(8)]
    barriers = [EpochLedger(c, "bar").barrier(1, "big") for c in clients]
    writes_before = sum(b.session.stats["writes"] for b in barriers)
    began: dict[str, float] = {}
    passed: dict[str, float] = {}
    errors: list[BaseException] = []

    def participant(i: int) -> None:
        try:
            time.sleep(random.Random(i).uniform(0, 1.0))
            barrier = barriers[i % len(barriers)]
            began[names[i]] = time.monotonic()
            barrier.arrive(names[i])
            outcome = barrier.wait(timeout=60)
            assert outcome.decision == "all"
            passed[names[i]] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=participant, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:3]
    assert len(passed) == n
    assert min(passed.values()) >= max(began.values())  # nobody passed before the last one arrived
    writes = sum(b.session.stats["writes"] for b in barriers) - writes_before
    # two writes per arrival (its arrival node, the arrivals counter); the release adds three, once
    # (closing the record, the release node, the history event)
    assert writes == 2 * n + 3, writes
    outcome = EpochLedger(zk, "bar").barrier(1, "big").outcome()
    assert outcome.late == () and outcome.arrived == n


@pytest.mark.slow
def test_20_processes(zk_server, zk_chroot, zk, epoch_open):
    n = 20
    names = [f"p{i:02d}" for i in range(n)]
    EpochLedger(zk, "bar").barrier(1, "procs").declare(StragglerPolicy.fail(timeout=120), names)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(n, mp_context=ctx) as pool:  # all at once: they wait for each other
        futures = [pool.submit(barrier_workers.arrive_and_wait, zk_server.settings(zk_chroot), "bar", 1, "procs",
                               name, i) for i, name in enumerate(names)]
        results = [f.result(timeout=180) for f in futures]
    assert {r["decision"] for r in results} == {"all"}
    assert min(r["passed"] for r in results) >= max(r["began"] for r in results)
    assert sorted(r["index"] for r in results) == list(range(1, n + 1))


def _frozen_participant(zk_server, zk_chroot, name, participant):
    worker = subprocess.Popen(
        [sys.executable, str(Path(barrier_workers.__file__)), zk_server.address + zk_chroot, "bar", "1", name,
         participant],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=zk_server.env(PYTHONPATH=str(Path(barrier_workers.__file__).parent)),
    )
    assert worker.stdout.readline().strip() == "READY"
    os.kill(worker.pid, signal.SIGSTOP)
    return worker


def _resume_and_arrive(worker):
    os.kill(worker.pid, signal.SIGCONT)
    worker.stdin.write("go\n")
    worker.stdin.flush()
    out, _ = worker.communicate(timeout=60)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fail", "quorum", "rerun"])
def test_straggler_policies_with_a_frozen_participant(zk_server, zk_chroot, zk, epoch_open, policy):
    names = ["a", "b", "c", "frozen"]
    timeout = 5.0  # long enough for three arrivals (a few requests) on a loaded machine: nobody passes before it
    declared = {"fail": StragglerPolicy.fail(timeout), "quorum": StragglerPolicy.quorum(3, timeout),
                "rerun": StragglerPolicy.rerun(timeout)}[policy]
    barrier = EpochLedger(zk, "bar").barrier(1, f"policy-{policy}")
    # The straggler is started and frozen BEFORE the declaration starts the clock: a Python process that
    # imports kazoo and connects took more than the whole timeout on a loaded machine, and the three
    # arrivals below then came after the deadline (and decided the policy themselves).
    worker = _frozen_participant(zk_server, zk_chroot, f"policy-{policy}", "frozen")
    before_declaring = time.time()  # the deadline is the declaration's wall clock plus the timeout
    barrier.declare(declared, names)
    try:
        for name in ("a", "b", "c"):
            assert not barrier.arrive(name).released
        assert barrier.outcome() is None  # before the timeout nobody passes
        if policy == "fail":
            with pytest.raises(BarrierFailed) as failed:
                barrier.wait(timeout=30)
            assert failed.value.late == ("frozen",)
            assert time.time() - before_declaring >= timeout  # not failed before the deadline
            out = _resume_and_arrive(worker)
            assert "after_release=True decision=failed" in out
        elif policy == "quorum":
            outcome = barrier.wait(timeout=30)
            assert (outcome.decision, outcome.released, outcome.late) == ("quorum", True, ("frozen",))
            out = _resume_and_arrive(worker)
            assert "after_release=True decision=quorum" in out  # the late participant is told
        else:
            report = barrier.wait(timeout=30)
            assert (report.decision, report.released, report.late) == ("rerun", False, ("frozen",))
            out = _resume_and_arrive(worker)  # the caller re-runs the straggler
            assert "after_release=False" in out
            outcome = barrier.wait(timeout=30)
            assert (outcome.decision, outcome.late) == ("all", ())
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGCONT)
            worker.kill()
    events = [e for e in EpochLedger(zk, "bar").history() if e.detail.get("barrier") == f"policy-{policy}"]
    recorded = [(e.event, e.detail.get("decision"), e.detail.get("late")) for e in events]
    expected_late = {"fail": ("barrier_released", "failed", ["frozen"]),
                     "quorum": ("barrier_released", "quorum", ["frozen"]),
                     "rerun": ("barrier_stragglers", None, ["frozen"])}[policy]
    assert expected_late in recorded


def test_release_callback_fires_once_from_one_watch(zk, epoch_open):
    barrier = EpochLedger(zk, "bar").barrier(1, "cb")
    barrier.declare(StragglerPolicy.fail(60), ["x", "y"])
    seen = []
    fired = threading.Event()
    barrier.on_release(lambda outcome: (seen.append(outcome.decision), fired.set()))
    barrier.arrive("x")
    time.sleep(0.2)
    assert not seen
    barrier.arrive("y")
    assert fired.wait(5)
    time.sleep(0.2)
    assert seen == ["all"]


def test_a_repeated_completing_arrival_releases(zk_server, zk_chroot, zk, epoch_open):
    """The process of the arrival that completes the set dies after its arrival committed and before
    it wrote the release (here: killed -9 in a worker process, between the two). Repeating that
    arrival releases the barrier at once, instead of leaving everyone to the straggler deadline."""
    barrier = EpochLedger(zk, "bar").barrier(1, "repeat")
    barrier.declare(StragglerPolicy.fail(timeout=3600), ["x", "y"])
    assert not barrier.arrive("x").released
    code = (
        "import os, signal, sys\n"
        "from zk_test_server import connect\n"
        "from airflow_epochs.coordination import EpochLedger\n"
        "zk = connect(sys.argv[1])\n"
        "b = EpochLedger(zk, 'bar').barrier(1, 'repeat')\n"
        "def die(*_a, **_k):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "b._decide = die  # the process dies right after the arrival committed\n"
        "b.arrive('y')\n"
    )
    dead = subprocess.run([sys.executable, "-c", code, zk_server.address + zk_chroot], capture_output=True, timeout=60,
                          env=zk_server.env(PYTHONPATH=str(Path(barrier_workers.__file__).parent)))
    assert dead.returncode == -signal.SIGKILL, dead.stderr[-2000:]
    assert barrier.status().arrived == ("x", "y") and barrier.outcome() is None  # arrived, not released
    started = time.monotonic()
    repeat = barrier.arrive("y")
    assert repeat.released and repeat.index == 0
    assert barrier.wait(timeout=5).decision == "all"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("policy", ["fail", "quorum", "rerun"])
def test_a_decision_over_thousands_of_stragglers_names_the_first_and_counts_the_rest(zk, epoch_open, policy):
    """1,000 participants of 100-character names: naming every straggler would take about 100 KB, over the
    payload limit, and the decision would be refused. It names the first MAX_LATE_NAMED (sorted) and counts
    them all, in the record, in its history event and in every reader's outcome."""
    names = [f"participant-{i:04d}-".ljust(100, "x") for i in range(1000)]
    assert len(json.dumps(names[1:]).encode()) > MAX_PAYLOAD_BYTES  # the old report could not be written
    now = [time.time()]
    barrier = EpochLedger(zk, "bar", clock=lambda: now[0]).barrier(1, f"wide-{policy}")
    declared = {"fail": StragglerPolicy.fail(60), "quorum": StragglerPolicy.quorum(1, 60),
                "rerun": StragglerPolicy.rerun(60)}[policy]
    barrier.declare(declared, reversed(names))
    assert not barrier.arrive(names[0]).released
    now[0] += 61  # past the deadline: the policy decides
    expected = tuple(names[1:MAX_LATE_NAMED + 1])
    if policy == "fail":
        with pytest.raises(BarrierFailed, match="and 899 more did not arrive") as failed:
            barrier.wait(timeout=30)
        assert (failed.value.late, failed.value.late_count) == (expected, 999)
    else:
        decided = barrier.apply_policy()
        assert decided is not None
        assert (decided.late, decided.stragglers, decided.late_truncated) == (expected, 999, True)
    outcome = EpochLedger(zk, "bar").barrier(1, f"wide-{policy}").outcome()  # read back by another reader
    assert outcome is not None
    assert (outcome.decision, outcome.arrived, outcome.late, outcome.stragglers, outcome.late_truncated) == (
        {"fail": "failed", "quorum": "quorum", "rerun": "rerun"}[policy], 1, expected, 999, True)
    event = [e for e in EpochLedger(zk, "bar").history() if e.detail.get("barrier") == f"wide-{policy}"][-1]
    assert (tuple(event.detail["late"]), event.detail["late_count"]) == (expected, 999)


def test_a_report_written_before_the_count_is_read_as_naming_every_straggler(zk, epoch_open):
    barrier = EpochLedger(zk, "bar").barrier(1, "old-report")
    barrier.declare(StragglerPolicy.rerun(3600), ["a", "b", "c"])
    epoch = PipelinePaths("bar").epoch(1)
    (folder,) = [child for child in zk.get_children(epoch) if child.startswith("b-")]
    # the form every release, failure and report had before the count: no late_count, no late_truncated
    old = payloads.encode("release", {"decision": "rerun", "arrived": 1, "late": ["b", "c"], "at": time.time()})
    zk.create(f"{epoch}/{folder}/old-report/report", old)
    outcome = barrier.outcome()
    assert outcome is not None
    assert (outcome.decision, outcome.late, outcome.stragglers, outcome.late_truncated) == \
        ("rerun", ("b", "c"), 2, False)
    assert outcome.late_text() == "['b', 'c']"
