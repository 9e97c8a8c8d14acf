"""SparkEpochHook's settings, without running Spark: bad settings refused naming the value, the default
master is the hook's own local connection, and the operator builds its hook on first use only."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from spark_pipeline import JOB

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.hooks.spark_epoch import LOCAL_SPARK_CONN, SparkEpochHook
from airflow_epochs.spark import EpochContext


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




def _standalone_submit(monkeypatch, password: str | None) -> tuple[list[str], str]:
    import json

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "127.0.0.1", "port": 7077, **({"password": password} if password else {})}))
    context = EpochContext(pipeline="p", partition="x", producer="x", epoch=1, attempt=1, config_version=0,
                           run="0123456789abcdef", storage="/lake")
    submit, folder = SparkEpochHook(application=str(JOB), conn_id="spark_cluster").submit_hook(context)
    assert folder is not None
    return submit._build_spark_submit_command(str(JOB)), folder


def test_a_standalone_clusters_secret_goes_to_the_driver_in_a_private_file_never_on_the_command_line(monkeypatch):
    import shutil

    secret = "0123456789abcdef" * 4
    argv, folder = _standalone_submit(monkeypatch, secret)
    try:
        assert argv[argv.index("--master") + 1] == "spark://127.0.0.1:7077"
        assert "spark.authenticate=true" in argv and "spark.ui.enabled=false" in argv
        assert not any(secret in arg for arg in argv)
        properties = Path(argv[argv.index("--properties-file") + 1])
        assert properties.parent == Path(folder) and oct(properties.stat().st_mode & 0o777) == "0o600"
        assert properties.read_text() == f"spark.authenticate.secret={secret}\n"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # a cluster without a secret: nothing is added (its admin may hold one in spark-defaults.conf)
    argv, folder = _standalone_submit(monkeypatch, None)
    shutil.rmtree(folder, ignore_errors=True)
    assert "--properties-file" not in argv and "spark.authenticate=true" not in argv


@pytest.mark.parametrize("password", ["short", "0123456789abcdef\nspark.driver.extraJavaOptions=-Dx=1",
                                      "0123456789abcdef\\u000a", "0123456789abcdef 0123"])
def test_a_secret_that_would_add_properties_of_its_own_is_refused_without_naming_it(monkeypatch, password):
    with pytest.raises(InvalidInput, match="'spark_cluster': the password") as refused:
        _standalone_submit(monkeypatch, password)
    assert password not in str(refused.value)


def _yarn_submit(monkeypatch, deploy_mode):
    import json

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps(
        {"conn_type": "spark", "host": "yarn", "password": "0123456789abcdef0123",
         "extra": {"deploy-mode": deploy_mode}}))
    context = EpochContext(pipeline="p", partition="x", producer="x", epoch=1, attempt=1, config_version=0,
                           run="0123456789abcdef", storage="/lake/secret-bucket")
    hook = SparkEpochHook(application=str(JOB), conn_id="spark_yarn")
    assert hook.check_master() == "yarn"
    submit, folder = hook.submit_hook(context)
    argv = submit._build_spark_submit_command(str(JOB))
    assert argv[argv.index("--master") + 1] == "yarn" and argv[argv.index("--deploy-mode") + 1] == deploy_mode
    return submit, folder, argv


def test_in_yarn_cluster_mode_the_command_sends_nothing_of_this_machine(monkeypatch):
    """YARN at the argument level only (no YARN here): the spark-submit command, not a run."""
    import json

    submit, folder, argv = _yarn_submit(monkeypatch, "cluster")
    # the driver runs on a YARN host: the context travels as an argument, with no file, interpreter,
    # secret or Spark setting of this machine
    assert folder is None and json.loads(argv[argv.index("--epoch-context") + 1])["epoch"] == 1
    assert "--properties-file" not in argv and "--conf" not in argv
    assert not submit._env_vars  # no PYSPARK_PYTHON naming this machine's interpreter


def test_in_yarn_client_mode_the_driver_here_reads_its_context_from_a_0600_file(monkeypatch):
    """In client mode the driver runs on this worker, as with a local or standalone master: its context
    (locations, perhaps with credentials) is in no process list or logged command, but in a 0600 file."""
    import shutil
    import sys

    submit, folder, argv = _yarn_submit(monkeypatch, "client")
    try:
        assert folder is not None and "--epoch-context" not in argv and "secret-bucket" not in " ".join(argv)
        context_file = Path(argv[argv.index("--epoch-context-file") + 1])
        assert context_file.parent == Path(folder) and "secret-bucket" in context_file.read_text()
        assert oct(context_file.stat().st_mode & 0o777) == "0o600"
        assert oct(Path(folder).stat().st_mode & 0o777) == "0o700"
        # this worker's interpreter for the driver only: YARN's executors run on its hosts' Python and must
        # reach the driver (no loopback address for it); no UI on this worker; no properties file
        assert submit._env_vars == {"PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONSAFEPATH": "1"}
        confs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
        # (the Spark provider also copies the variables into spark.yarn.appMasterEnv, for cluster mode)
        assert confs == ["spark.ui.enabled=false", *(f"spark.yarn.appMasterEnv.{k}={v}"
                                                      for k, v in submit._env_vars.items())], confs
        assert submit._env == submit._env_vars  # the driver's process (spark-submit, here) gets them
        assert "--properties-file" not in argv
    finally:
        shutil.rmtree(folder or "", ignore_errors=True)
