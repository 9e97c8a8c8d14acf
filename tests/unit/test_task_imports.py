"""What a Spark epoch task imports that it does not use (issue 50: a producer task's profile showed 0.8
CPU-seconds of the OpenLineage client and 0.3 of the Spark provider's submit hook in every task on Spark
Connect).

A producer's vote names its OpenLineage run only where the OpenLineage provider emits events: without a
transport (lineage disabled) the task loads none of the OpenLineage client and votes no run; with one, it
names the run the listener emits. The Spark epoch hook loads ``SparkSubmitHook`` only for ``spark-submit``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
from types import SimpleNamespace
import pendulum
from airflow_epochs.lineage.runs import lineage_enabled, task_lineage_run

run = SimpleNamespace(logical_date=pendulum.datetime(2013, 1, 1, tz="UTC"), clear_number=0,
                     run_after=pendulum.datetime(2013, 1, 2, tz="UTC"))
ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, dag_run=run,
                     logical_date=run.logical_date, get_template_context=lambda: {"dag_run": run})
run = task_lineage_run(ti)
print(json.dumps({"enabled": lineage_enabled(), "run": run,
                  "client_loaded": "airflow.providers.openlineage.plugins.macros" in sys.modules}))
"""


def _probe(tmp_path, **settings: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__OPENLINEAGE__", "OPENLINEAGE"))}
    env.update(AIRFLOW_HOME=str(tmp_path), **settings)  # no airflow.cfg there: the environment decides
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_without_a_transport_no_run_is_named_and_the_client_is_not_loaded(tmp_path):
    found = _probe(tmp_path)
    assert found == {"enabled": False, "run": None, "client_loaded": False}


def test_with_a_transport_the_listeners_run_is_named(tmp_path):
    transport = json.dumps({"type": "file", "log_file_path": str(tmp_path / "events.jsonl")})
    found = _probe(tmp_path, AIRFLOW__OPENLINEAGE__TRANSPORT=transport, AIRFLOW__OPENLINEAGE__NAMESPACE="ns")
    assert found["enabled"] is True and found["client_loaded"] is True
    assert found["run"]["namespace"] == "ns" and found["run"]["job"] == "d.t"
    assert len(found["run"]["runId"]) == 36  # a UUID, the one the provider's listener puts in the task's events


def test_disabled_by_setting_even_with_a_transport(tmp_path):
    transport = json.dumps({"type": "file", "log_file_path": str(tmp_path / "events.jsonl")})
    found = _probe(tmp_path, AIRFLOW__OPENLINEAGE__TRANSPORT=transport, AIRFLOW__OPENLINEAGE__DISABLED="True")
    assert found == {"enabled": False, "run": None, "client_loaded": False}


HOOK_PROBE = """
import json, sys
from airflow_epochs.hooks import spark_epoch
before = "airflow.providers.apache.spark.hooks.spark_submit" in sys.modules
local = spark_epoch.EpochSparkSubmitHook.get_connection(spark_epoch.LOCAL_SPARK_CONN)
print(json.dumps({"loaded_on_import": before, "class": spark_epoch.EpochSparkSubmitHook.__mro__[1].__name__,
                  "local_master": local.host,
                  "loaded_on_use": "airflow.providers.apache.spark.hooks.spark_submit" in sys.modules}))
"""


def test_the_spark_epoch_hook_loads_the_submit_hook_only_when_it_is_used(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", HOOK_PROBE], env=env, capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"loaded_on_import": False, "class": "SparkSubmitHook", "local_master": "local[*]",
                     "loaded_on_use": True}


PYARROW_PROBE = """
import json, sys
import airflow_epochs.coordination, airflow_epochs.operators, airflow_epochs.sensors
from airflow_epochs.spark.storage import read_manifest
from airflow_epochs.coordination.state.archive_storage import read_stored
before = [m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules]
read_manifest(sys.argv[1])  # the first storage call loads it
print(json.dumps({"before": before, "after": "pyarrow.fs" in sys.modules}))
"""


def test_a_task_that_touches_no_storage_loads_no_pyarrow(tmp_path):
    # every task of an epoch DAG imports the operators and the core; only storage and archive calls need
    # pyarrow (and numpy under it): about 0.3 CPU-seconds of an opening's, an arrival's or a close's start
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", PYARROW_PROBE, str(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"before": [], "after": True}
