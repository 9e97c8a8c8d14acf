"""SparkEpochHook on real PySpark and a real ZooKeeper: spark-submit on the default local master (no
Spark connection anywhere) with and without ``spark-submit`` on PATH, the process environment left
exactly as it was, the sealed result checked with pandas; refusals before anything runs."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from spark_pipeline import JOB, PARTITION, PRODUCER, assert_matches_pandas, pipeline, sealed_result, write_inputs

from airflow_epochs.hooks.spark_epoch import LOCAL_SPARK_CONN, SparkEpochHook, spark_submit_path
from airflow_epochs.spark import sealed_runs


def _without_venv_bin(path: str) -> str:
    """PATH without this interpreter's folder (where the pyspark wheel's spark-submit is)."""
    here = os.path.dirname(sys.executable)
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(here))


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_hook_submits_and_seals_on_the_local_master_and_leaves_the_environment_alone(
        zk_connection, zk, spark, tmp_path, monkeypatch):
    assert not any(k.startswith("AIRFLOW_CONN_SPARK") or k == f"AIRFLOW_CONN_{LOCAL_SPARK_CONN.upper()}"
                   for k in os.environ)  # no Spark connection anywhere: the hook's own local master
    ledger = pipeline(zk, "hook_local")
    inputs = write_inputs(tmp_path / "in", 2)
    storage = str(tmp_path / "out")
    hook = SparkEpochHook(application=str(JOB))
    # This test's own temporary folder (/tmp is shared with whatever else runs Spark jobs here).
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))

    # Epoch 1 without spark-submit on PATH: the hook runs the wheel's, by its path.
    full_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", _without_venv_bin(full_path))
    assert spark_submit_path() == os.path.join(os.path.dirname(sys.executable), "spark-submit")
    for epoch in (1, 2):
        if epoch == 2:  # and epoch 2 with it on PATH, where the Spark provider finds it by name
            monkeypatch.setenv("PATH", full_path)
            assert spark_submit_path() is None
        before = dict(os.environ)
        attempt = ledger.open_epoch(epoch)
        outcome = hook.submit_and_seal(attempt, PARTITION, PRODUCER, storage=storage,
                                       inputs={"events": inputs[epoch]})
        assert dict(os.environ) == before  # nothing set, nothing changed: not PATH, not a connection
        assert outcome.action == "ran" and outcome.partition_sealed and outcome.epoch_sealed
        assert outcome.snapshot_epoch == (epoch - 1 or None)
        assert [Path(r).name for r in sealed_runs(ledger, PARTITION, epoch)] == [f"run={outcome.run}"]
        # The driver's private context file is gone once the job ended.
        assert not list(private_tmp.glob("airflow-epochs-context-*"))
    daily, running, _ = sealed_result(spark, ledger, 2)
    assert_matches_pandas(daily, running, inputs, 2)

    # Asked again for a voted epoch: nothing is submitted.
    again = hook.submit_and_seal(attempt, PARTITION, PRODUCER, storage=storage,
                                 inputs={"events": inputs[2]})
    assert again.action == "sealed" and again.run is None






