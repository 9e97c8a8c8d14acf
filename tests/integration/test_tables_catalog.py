"""Catalog settings from a connection's fields: allow-listed extras, the secret kept out of messages;
and the lineage of a Spark epoch task that read sealed partitions (real ZooKeeper, no Spark needed)."""

from __future__ import annotations

import types

import jsonschema
import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig


@pytest.mark.integration
def test_spark_task_lineage_names_sealed_inputs_output_and_the_seal(zk, zk_connection):
    from airflow_epochs.lineage.facets import FACET_NAME, manifest_digest, run_facet_schema
    from airflow_epochs.lineage.operators import spark_task_lineage

    ledger = EpochLedger(zk, "joined", owner="tests")
    ledger.create_pipeline(PipelineConfig({"flights": ("clean",), "daily": ("join",)}), first_epoch=1)
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "flights", "clean", {"outputs": {"data": {"path": "/lake/f/1", "rows": 3}}})
    operator = types.SimpleNamespace(storage="/lake", partition="daily", producer="join",
                                     sealed_inputs={"flights": "flights"}, table=None,
                                     zookeeper_conn_id="zookeeper_default", root="/airflow-epochs",
                                     epoch_attempt=attempt, published=None)
    assert spark_task_lineage(operator, complete=False).outputs == []  # the epoch is not known before execute
    before = spark_task_lineage(operator, complete=True)
    [source] = before.inputs
    assert (source.namespace, source.name) == ("file", "/lake/joined/flights")
    assert source.inputFacets["subset"].inputCondition.partitions[0].identifier == "1"
    [target] = before.outputs
    assert (target.namespace, target.name) == ("file", "/lake/joined/daily")
    facet = before.run_facets[FACET_NAME]
    assert (facet.sealed, facet.producers, facet.attempt) == (False, ["join"], attempt.token)
    manifest = {"outputs": {"data": {"path": "/lake/d/1", "rows": 2}}}
    ledger.vote(attempt, "daily", "join", manifest, upstream={"raw": 4})
    after = spark_task_lineage(operator, complete=True).run_facets[FACET_NAME]
    assert after.sealed and after.manifestDigests == {"join": manifest_digest(manifest)}
    assert after.lineageVector == {"raw": 4} and after.sealZxid == ledger.seal(1, "daily").zxid
    from openlineage.client.serde import Serde

    jsonschema.validate(Serde.to_dict(after), run_facet_schema())




@pytest.mark.integration
def test_airflow_knows_the_iceberg_connection_type_and_tests_a_connection(airflow_home, tmp_path, monkeypatch):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from airflow_epochs import get_provider_info
    from airflow_epochs.tables.hook import IcebergCatalogHook

    [declared] = [c for c in get_provider_info()["connection-types"] if c["connection-type"] == "iceberg"]
    assert declared["hook-class-name"] == "airflow_epochs.tables.hook.IcebergCatalogHook"
    assert set(declared["conn-fields"]) == {"catalog", "warehouse", "sqlite", "name"}
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
    airflow = str(Path(sys.executable).parent / "airflow")
    listed = subprocess.run([airflow, "providers", "hooks", "-o", "json"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    hooks = {h["connection_type"]: h for h in json.loads(listed.stdout[listed.stdout.index("["):])}
    assert hooks["iceberg"]["class"] == "airflow_epochs.tables.hook.IcebergCatalogHook"
    assert hooks["iceberg"]["package_name"] == "airflow-provider-epochs"

    extra = {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "wh").as_uri()}
    env["AIRFLOW_CONN_ICEBERG_PROBE"] = json.dumps({"conn_type": "iceberg", "extra": extra})
    tested = subprocess.run([airflow, "connections", "test", "iceberg_probe"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert tested.returncode == 0 and "success" in tested.stdout.lower(), (tested.stdout + tested.stderr)[-2000:]
    assert (tmp_path / "catalog.db").is_file()  # the test reached the catalog: it made its tables

    # The hook in this process: the same connection answers; a catalog that cannot be opened does not.
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_PROBE", env["AIRFLOW_CONN_ICEBERG_PROBE"])
    hook = IcebergCatalogHook(iceberg_conn_id="iceberg_probe")
    assert hook.test_connection() == (True, f"{hook.settings.describe()}: 0 namespace(s)")
    broken = {**extra, "sqlite": str(tmp_path / "no-such-folder" / "catalog.db")}
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_BROKEN", json.dumps({"conn_type": "iceberg", "extra": broken}))
    ok, message = IcebergCatalogHook(iceberg_conn_id="iceberg_broken").test_connection()
    assert not ok and "OperationalError" in message, message
