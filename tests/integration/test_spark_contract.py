"""The epoch job contract on real PySpark and a real ZooKeeper: running totals over 5 epochs give the
same sealed result (equal to pandas on the raw inputs) with and without faults, and output is visible
only through seals."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from spark_pipeline import (
    EPOCHS,
    PARTITION,
    PRODUCER,
    assert_matches_pandas,
    job_main,
    pipeline,
    run_clean,
    run_dirs,
    runner_for,
    sealed_result,
    write_inputs,
)

from airflow_epochs.coordination import (
    Attempt,
    EpochAlreadySealed,
    EpochLedger,
    EpochOutOfOrder,
    PartitionNotSealed,
    SessionLost,
    check_submission,
)
from airflow_epochs.spark import (
    EpochContext,
    JobWithoutManifest,
    read_manifest,
    read_sealed,
    run_epoch,
    sealed_runs,
    submit_and_seal,
)

pytestmark = pytest.mark.timeout(600)



def test_fault_free_pipeline_matches_pandas_and_runs_once_per_epoch(zk, spark, tmp_path):
    inputs = write_inputs(tmp_path / "in", EPOCHS)
    ledger = run_clean(zk, spark, tmp_path / "out", inputs, "clean")
    daily, running, checksums = sealed_result(spark, ledger, EPOCHS)
    assert_matches_pandas(daily, running, inputs, EPOCHS)
    assert len(checksums) == EPOCHS + 1 and len(set(checksums)) == len(checksums)
    for epoch in range(1, EPOCHS + 1):
        assert run_dirs(tmp_path / "out", "clean", epoch) == sealed_runs(ledger, PARTITION, epoch)


def test_faults_at_random_points_change_nothing_in_the_sealed_result(zk_factory, spark, tmp_path):
    """Same inputs, two pipelines: one clean, one with a failure after the write (before the manifest),
    a failure in the middle of a retried attempt, and a zombie attempt that finishes after its
    successor sealed the epoch. The checksums of everything visible are identical."""
    zk = zk_factory()
    inputs = write_inputs(tmp_path / "in", EPOCHS)
    clean = run_clean(zk, spark, tmp_path / "clean", inputs, "clean")
    _, _, want = sealed_result(spark, clean, EPOCHS)

    rng = random.Random(int(os.environ.get("EPOCHS_FAULT_SEED", "20261122")))
    fail_epochs = set(rng.sample(range(1, EPOCHS + 1), 2))
    zombie_epoch = rng.choice([e for e in range(2, EPOCHS + 1) if e not in fail_epochs])
    faults = tmp_path / "faults"
    faults.mkdir()
    storage = tmp_path / "faulty"
    ledger = pipeline(zk, "faulty")
    runner = runner_for(spark)
    for epoch in range(1, EPOCHS + 1):
        extra = {"faults": str(faults)}
        if epoch in fail_epochs:
            (faults / f"epoch-{epoch}").write_text("fail_after_write")
            attempt = ledger.open_epoch(epoch)
            with pytest.raises(RuntimeError, match="injected failure"):
                submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(storage), runner=runner,
                                inputs={"events": inputs[epoch], **extra})
            assert ledger.seal(epoch, PARTITION) is None
            # The retry runs again in the same attempt, in a new run directory.
            outcome = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(storage), runner=runner,
                                      inputs={"events": inputs[epoch], **extra})
        elif epoch == zombie_epoch:
            outcome = _zombie_then_successor(zk_factory, spark, ledger, epoch, storage, faults,
                                             {"events": inputs[epoch], **extra})
        else:
            attempt = ledger.open_epoch(epoch)
            outcome = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(storage), runner=runner,
                                      inputs={"events": inputs[epoch], **extra})
        assert outcome.partition_sealed and outcome.epoch_sealed
    daily, running, got = sealed_result(spark, ledger, EPOCHS)
    assert got == want, f"fail at {sorted(fail_epochs)}, zombie at {zombie_epoch}"
    assert_matches_pandas(daily, running, inputs, EPOCHS)
    for epoch in fail_epochs:  # the failed runs were collected after the seal
        assert run_dirs(storage, "faulty", epoch) == sealed_runs(ledger, PARTITION, epoch)


def _zombie_then_successor(zk_factory, spark, ledger, epoch, storage, faults, inputs):
    """Attempt A's job stalls after writing; A's session goes (as a paused worker's would), B takes
    over and seals; then A's job finishes and its vote is refused by the fencing token."""
    release = faults / f"release-{epoch}"
    (faults / f"epoch-{epoch}").write_text(f"hold:{release}")
    zk_a = zk_factory()
    attempt_a = EpochLedger(zk_a, ledger.pipeline, owner="worker-a").open_epoch(epoch)
    # As it reaches another process through XCom: no session of that process guards it, only the
    # fencing token does (in this process, the expired session's guard would refuse it first).
    passed = Attempt.from_dict({**attempt_a.to_dict(), "session": None})
    result: dict[str, object] = {}

    def zombie() -> None:
        try:
            submit_and_seal(zk_a, passed, PARTITION, PRODUCER, storage=str(storage), runner=runner_for(spark),
                            inputs=inputs, lock_timeout=60)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            result["error"] = exc

    thread = threading.Thread(target=zombie)
    thread.start()
    deadline = time.monotonic() + 120
    while not list(faults.glob(f"held-{epoch}-*")):
        assert time.monotonic() < deadline and thread.is_alive(), result
        time.sleep(0.2)
    # A's worker loses its session (its lock goes with it); the standby takes over the epoch.
    zk_a.stop()
    zk_a.start()
    zk_b = zk_factory()
    ledger_b = EpochLedger(zk_b, ledger.pipeline, owner="worker-b")
    attempt_b = ledger_b.open_epoch(epoch, takeover=True)
    assert attempt_b.token > attempt_a.token
    outcome = submit_and_seal(zk_b, attempt_b, PARTITION, PRODUCER, storage=str(storage), runner=runner_for(spark),
                              inputs=inputs)
    assert outcome.snapshot_epoch == epoch - 1
    release.write_text("go")
    thread.join(120)
    assert isinstance(result.get("error"), EpochAlreadySealed), result
    with pytest.raises(SessionLost):  # the handle as this process obtained it, session guard kept
        EpochLedger(zk_a, ledger.pipeline).vote(Attempt.from_dict(attempt_a.to_dict()), PARTITION, PRODUCER)
    seal = ledger.seal(epoch, PARTITION)
    assert seal is not None and seal.attempt == attempt_b.token
    # A's late manifest exists on disk but no seal names it.
    late = [d for d in run_dirs(storage, ledger.pipeline, epoch) if f"attempt={attempt_a.token}" in d]
    assert late and all(d not in sealed_runs(ledger, PARTITION, epoch) for d in late)
    return outcome


def test_unsealed_output_is_invisible_and_a_retry_after_the_vote_runs_nothing(zk, spark, tmp_path):
    inputs = write_inputs(tmp_path / "in", 2)
    ledger = pipeline(zk, "visible")
    attempt = ledger.open_epoch(1, request_id="open-visible-1")
    storage = str(tmp_path / "out")
    calls = []

    def runner(context: EpochContext):
        calls.append(context.run)
        return run_epoch(job_main(), spark, context)

    # A finished run that was never voted: its manifest is on disk, yet readers see nothing.
    context = EpochContext(pipeline="visible", partition=PARTITION, producer=PRODUCER, epoch=1,
                           attempt=attempt.token, config_version=attempt.config_version, run="0" * 16,
                           storage=storage, inputs={"events": inputs[1]})
    manifest = run_epoch(job_main(), spark, context)
    assert read_manifest(manifest["location"])["outputs"]["data"]["rows"] > 0
    with pytest.raises(PartitionNotSealed, match="'totals' is not sealed at epoch 1"):
        read_sealed(spark, "visible", PARTITION, [1], zookeeper=ledger)

    # Epoch 2 may not run before epoch 1 is sealed: refused before the runner is called.
    assert ledger.open_epoch(1, request_id="open-visible-1") == attempt  # the same request resumes
    early = Attempt("visible", 2, attempt.token + 1, "tests", attempt.config_version, 0)
    with pytest.raises(EpochOutOfOrder, match="refusing to submit epoch 2"):
        submit_and_seal(zk, early, PARTITION, PRODUCER, storage=storage, runner=runner,
                        inputs={"events": inputs[2]})
    assert calls == [] and not (tmp_path / "out" / "visible" / PARTITION / "epoch=2").exists()

    first = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=storage, runner=runner,
                            inputs={"events": inputs[1]})
    assert first.action == "ran" and len(calls) == 1
    # The never-voted run was collected after the seal; the sealed one stays.
    assert run_dirs(tmp_path / "out", "visible", 1) == sealed_runs(ledger, PARTITION, 1) == [first.manifest["location"]]
    again = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=storage, runner=runner,
                            inputs={"events": inputs[1]})
    assert again.action == "sealed" and len(calls) == 1 and again.manifest == first.manifest
    assert check_submission(ledger, attempt, PARTITION, PRODUCER).action == "sealed"


def test_a_job_that_writes_no_manifest_is_not_voted(zk, spark, tmp_path):
    inputs = write_inputs(tmp_path / "in", 1)
    ledger = pipeline(zk, "nomanifest")
    attempt = ledger.open_epoch(1)
    with pytest.raises(JobWithoutManifest, match="ended without a manifest"):
        submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(tmp_path / "out"), runner=lambda c: None,
                        inputs={"events": inputs[1]})
    assert ledger.vote_of(1, PARTITION, PRODUCER) is None and ledger.seal(1, PARTITION) is None




