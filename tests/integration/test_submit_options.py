"""No code execution through configuration: submit_options checked key by key, each Spark master mode
accepted or refused up front, and the spark-submit argv for YARN and Kubernetes checked for leaks of
this machine's environment. (Local and standalone client mode run for real in test_spark_operator.)"""

from __future__ import annotations

import json
import os
import sys

import pytest

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.spark import EpochContext


def _context() -> EpochContext:
    return EpochContext(pipeline="p", partition="x", producer="x", epoch=1, attempt=1, config_version=0,
                        run="0123456789abcdef", storage="s3://bucket/lake")


def _argv(monkeypatch, conn: dict, **options) -> list[str]:
    from airflow_epochs.hooks.spark_epoch import SparkEpochHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TARGET", json.dumps({"conn_type": "spark", **conn}))
    hook, _ = SparkEpochHook(application="job.py", conn_id="spark_target",
                             submit_options=options or None).submit_hook(_context())
    return hook._build_spark_submit_command("job.py")


def _assert_no_local_environment(argv: list[str]) -> None:
    text = " ".join(argv)
    assert "appMasterEnv" not in text.replace("appMasterEnv.TZ", "") and "driverEnv.PATH" not in text
    for leaked in (sys.executable, os.environ.get("HOME", "/nonexistent-home"), "PYSPARK_PYTHON", "SPARK_LOCAL_IP"):
        assert leaked not in text, leaked
    assert os.environ["PATH"] not in text


def test_yarn_argv_carries_no_local_environment(monkeypatch, airflow_home):
    argv = _argv(monkeypatch, {"host": "yarn", "extra": {"deploy-mode": "cluster"}})
    assert argv[argv.index("--master") + 1] == "yarn" and argv[argv.index("--deploy-mode") + 1] == "cluster"
    _assert_no_local_environment(argv)
    # Client mode: the driver runs here, on this worker's interpreter, with its context in a 0600 file. The Spark
    # provider's hook also copies a YARN job's driver environment to the application master (an executor
    # launcher in client mode, which runs no Python): those two entries, and nothing else of this machine.
    argv = _argv(monkeypatch, {"host": "yarn", "extra": {"deploy-mode": "client"}})
    assert argv[argv.index("--master") + 1] == "yarn" and argv[argv.index("--deploy-mode") + 1] == "client"
    master_env = [a for a in argv if "appMasterEnv" in a]
    assert master_env == [f"spark.yarn.appMasterEnv.PYSPARK_DRIVER_PYTHON={sys.executable}",
                          "spark.yarn.appMasterEnv.PYTHONSAFEPATH=1"], master_env
    _assert_no_local_environment([a for a in argv if a not in master_env])
    # The user's own (allowed) variables go to the application master, and only those.
    argv = _argv(monkeypatch, {"host": "yarn", "extra": {"deploy-mode": "cluster"}}, env_vars={"TZ": "UTC"})
    assert [a for a in argv if "appMasterEnv" in a] == ["spark.yarn.appMasterEnv.TZ=UTC"]
    _assert_no_local_environment(argv)


def test_kubernetes_is_refused_without_its_provider_and_leaks_nothing_with_it(monkeypatch, airflow_home):
    from airflow.providers.apache.spark.hooks import spark_submit

    from airflow_epochs.hooks import spark_epoch as spark_module

    conn = {"host": "k8s://https://kube:6443", "extra": {"deploy-mode": "cluster", "namespace": "etl"}}
    if not spark_module.kubernetes_provider_installed():
        with pytest.raises(InvalidInput, match="needs the apache-airflow-providers-cncf-kubernetes package"):
            _argv(monkeypatch, conn)
    # With the provider (its client stands in here: only the argv is built, nothing is submitted).
    monkeypatch.setattr(spark_module, "kubernetes_provider_installed", lambda: True)
    monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    argv = _argv(monkeypatch, conn)
    assert argv[argv.index("--master") + 1] == "k8s://https://kube:6443"
    assert "spark.kubernetes.namespace=etl" in argv
    _assert_no_local_environment(argv)


def test_standalone_cluster_mode_is_refused_before_anything_runs(monkeypatch, airflow_home):
    with pytest.raises(InvalidInput, match="does not run Python applications in cluster mode"):
        _argv(monkeypatch, {"host": "spark://127.0.0.1", "port": 7077, "extra": {"deploy-mode": "cluster"}})
    with pytest.raises(InvalidInput, match="does not run Python applications in cluster mode"):
        _argv(monkeypatch, {"host": "spark://127.0.0.1", "port": 7077}, deploy_mode="cluster")


def test_local_and_standalone_client_run_this_interpreter(monkeypatch, airflow_home):
    import shutil
    from pathlib import Path

    for conn in ({"host": "spark://127.0.0.1", "port": 7077}, {"host": "local[2]"}):
        argv = _argv(monkeypatch, conn)
        assert "--deploy-mode" not in argv  # client: the driver runs here, with this worker's interpreter
        # Its context (locations, maybe credentials) is in a 0600 file, not on the command line.
        path = Path(argv[argv.index("--epoch-context-file") + 1])
        try:
            assert "--epoch-context" not in argv and "s3://bucket/lake" not in " ".join(argv)
            assert path.stat().st_mode & 0o777 == 0o600 and "s3://bucket/lake" in path.read_text()
        finally:
            shutil.rmtree(path.parent)
    assert argv[argv.index("--master") + 1] == "local[2]"
