"""A correction on real PySpark: the running-totals job (tests/spark_jobs/running_totals.py) over 5 epochs;
epoch 2's input arrives corrected. Re-sealing ``totals`` at epoch 2 re-produces epochs 2-5 (each read the
snapshot the one before left, as the lineage vectors submit_and_seal records say), through the same job,
and what a consumer reads afterwards equals pandas over the corrected input."""

from __future__ import annotations

import csv

import pytest
from spark_pipeline import (
    EPOCHS,
    PARTITION,
    PRODUCER,
    assert_matches_pandas,
    run_clean,
    runner_for,
    sealed_result,
    write_inputs,
)

from airflow_epochs.coordination.recipes.corrections.records import read_key
from airflow_epochs.coordination.recipes.corrections.versions import latest_lineage
from airflow_epochs.spark import resubmit_version, sealed_outputs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_a_corrected_input_reseals_the_running_totals_after_it(zk, spark, tmp_path):
    inputs = write_inputs(tmp_path / "in", EPOCHS)
    storage = tmp_path / "out"
    ledger = run_clean(zk, spark, storage, inputs, "corrected")
    assert ledger.lineage(3, PARTITION).upstream == {read_key("corrected", PARTITION): 2}
    # and which version of it: the original seal's snapshot (what a correction judges it by)
    assert dict(ledger.seal_record(3, PARTITION).read_versions) == {read_key("corrected", PARTITION): 1}

    with open(f"{inputs[2]}/part-0.csv", "a", newline="") as out:  # the late rows of epoch 2
        csv.writer(out).writerows([["a", 1000], ["z", 7]])
    # [START spark]
    asked = ledger.corrections.reseal(2, PARTITION, reason="late rows for epoch 2")
    first = resubmit_version(ledger, asked, PRODUCER, storage=str(storage), runner=runner_for(spark),
                             inputs={"events": inputs[2]})
    assert first.vote.sealed and first.snapshot_epoch == 1
    redone = []
    while pending := ledger.corrections.pending():
        for item in pending:
            outcome = resubmit_version(ledger, item, PRODUCER, storage=str(storage), runner=runner_for(spark),
                                       inputs={"events": inputs[item.epoch]})
            assert outcome.vote.sealed and outcome.snapshot_epoch == item.epoch - 1
            redone.append(item.epoch)
    # [END spark]
    assert redone == [3, 4, 5]
    # each re-produced epoch names the corrected version of the snapshot it started from
    newest = [ledger.ctx.call(lambda call, e=e: latest_lineage(call, ledger.ctx, e, PARTITION), what="lineage")
              for e in (3, 4, 5)]
    assert [(n.version, n.read_versions) for n in newest] == [(2, {read_key("corrected", PARTITION): 2})] * 3
    assert [c.state for c in ledger.corrections.list()] == ["done"]
    assert ledger.frontier() == EPOCHS
    assert [o.version for o in sealed_outputs(ledger, PARTITION, range(1, EPOCHS + 1))] == [1, 2, 2, 2, 2]
    daily, running, _ = sealed_result(spark, ledger, EPOCHS)
    assert_matches_pandas(daily, running, inputs, EPOCHS)  # pandas over the corrected input
