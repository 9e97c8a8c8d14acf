"""SparkEpochHook on real PySpark and a real ZooKeeper: spark-submit on the default local master (no
Spark connection anywhere) with and without ``spark-submit`` on PATH, the process environment left
exactly as it was, the sealed result checked with pandas; refusals before anything runs."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
from spark_pipeline import JOB, PARTITION, PRODUCER, assert_matches_pandas, pipeline, sealed_result, write_inputs

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.hooks.spark_epoch import LOCAL_SPARK_CONN, SparkEpochHook, spark_submit_path
from airflow_epochs.spark import EpochContext, sealed_runs


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


def test_the_default_master_is_the_hooks_own_local_connection(monkeypatch):
    hook = SparkEpochHook(application=str(JOB))
    conn = hook.get_conn()
    assert (hook.conn_id, conn.conn_type, conn.host) == (LOCAL_SPARK_CONN, "spark", "local[*]")
    assert hook.check_master() == "local"
    context = EpochContext(pipeline="p", partition="x", producer="x", epoch=1, attempt=1, config_version=0,
                           run="0123456789abcdef", storage="/lake")
    before = dict(os.environ)
    submit, folder = hook.submit_hook(context)
    try:
        argv = submit._build_spark_submit_command(str(JOB))
        assert argv[argv.index("--master") + 1] == "local[*]"
        assert folder is not None and argv[argv.index("--epoch-context-file") + 1].startswith(folder)
        assert oct(Path(folder, "context.json").stat().st_mode & 0o777) == "0o600"
    finally:
        import shutil

        shutil.rmtree(folder or "", ignore_errors=True)
    assert dict(os.environ) == before


def test_bad_settings_are_refused_naming_the_value(tmp_path):
    with pytest.raises(InvalidInput, match=re.escape("does-not-exist.py' does not exist")):
        SparkEpochHook(application=str(tmp_path / "does-not-exist.py")).check_inputs(str(tmp_path), {})
    with pytest.raises(InvalidInput, match=re.escape("events location '/raw/../etc' has a '..' segment")):
        SparkEpochHook(application=str(JOB)).check_inputs(str(tmp_path), {"events": "/raw/../etc"})
    with pytest.raises(InvalidInput, match="spark-submit only"):
        SparkEpochHook(application=str(JOB), spark_connect_conn_id="connect", submit_options={"driver_memory": "1g"})
    with pytest.raises(InvalidInput, match="'PATH' is refused"):
        SparkEpochHook(application=str(JOB), submit_options={"env_vars": {"PATH": "/tmp/fake-bin"}})


def test_the_operator_builds_its_hook_on_first_use_only(monkeypatch):
    from airflow_epochs.hooks import spark_epoch
    from airflow_epochs.operators import SparkEpochOperator

    built: list[SparkEpochHook] = []

    class CountingHook(SparkEpochHook):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            built.append(self)

    monkeypatch.setattr(spark_epoch, "SparkEpochHook", CountingHook)
    operator = SparkEpochOperator(task_id="t", application=str(JOB), partition="x", storage="/lake",
                                  conn_id="spark_nowhere", attempt_task_id="open")
    assert built == []  # DAG parse time: no hook, no connection lookup
    hook = operator.hook
    assert built == [hook] and operator.hook is hook
    assert (hook.application, hook.conn_id, hook.spark_connect_conn_id) == (str(JOB), "spark_nowhere", None)
