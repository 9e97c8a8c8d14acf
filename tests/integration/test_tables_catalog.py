"""Catalog settings from a connection's fields: allow-listed extras, the secret kept out of messages;
and the lineage of a Spark epoch task that read sealed partitions (real ZooKeeper, no Spark needed)."""

from __future__ import annotations

import types

import jsonschema
import pytest

from airflow_epochs.coordination import EpochLedger, InvalidInput, PipelineConfig
from airflow_epochs.tables import catalog_settings


def test_postgres_settings_keep_the_password_apart():
    settings = catalog_settings(host="db.internal", port=5433, login="ice", password="s3cr@t/pw", schema="lake",
                                extra={"catalog": "sql", "warehouse": "s3://bucket/wh"})
    assert settings.properties["uri"] == "postgresql+psycopg2://ice:{password}@db.internal:5433/lake"
    assert "s3cr" not in repr(settings) and "s3cr" not in settings.describe()
    assert settings.secret == {"password": "s3cr%40t%2Fpw"}


@pytest.mark.parametrize(("extra", "message"), [
    ({"catalog": "hive", "warehouse": "w"}, "kind must be one of"),
    ({"catalog": "sql", "warehouse": "w", "py-catalog-impl": "evil.Catalog"}, "unknown extra(s) ['py-catalog-impl']"),
    ({"catalog": "sql"}, "needs extra 'warehouse'"),
    ({"catalog": "rest", "py-io-impl": "evil.FileIO"}, "extra 'py-io-impl' is not a REST catalog setting"),
])
def test_bad_extras_are_refused_by_name(extra, message):
    with pytest.raises(InvalidInput) as refused:
        catalog_settings(host="h", schema="db", password="pw-not-shown", extra=extra)
    assert message in str(refused.value) and "pw-not-shown" not in str(refused.value)


def test_rest_settings_pass_allow_listed_keys_through():
    settings = catalog_settings(host="https://catalog.example:8181/api", password="tok",
                                extra={"catalog": "rest", "warehouse": "prod", "s3.region": "eu-west-1",
                                       "header.X-Iceberg-Access-Delegation": "vended-credentials"})
    assert settings.properties == {"type": "rest", "uri": "https://catalog.example:8181/api", "warehouse": "prod",
                                   "s3.region": "eu-west-1",
                                   "header.X-Iceberg-Access-Delegation": "vended-credentials"}
    assert settings.secret == {"token": "tok"}


def test_rest_credentials_stay_out_of_the_visible_properties():
    settings = catalog_settings(host="https://catalog.example", extra={
        "catalog": "rest", "credential": "client:s3cr3t", "s3.secret-access-key": "k3y",
        "s3.access-key-id": "AKIA", "header.Authorization": "Bearer t0k", "s3.region": "eu"})
    assert settings.properties == {"type": "rest", "uri": "https://catalog.example", "s3.region": "eu"}
    assert settings.secret == {"credential": "client:s3cr3t", "s3.secret-access-key": "k3y",
                               "s3.access-key-id": "AKIA", "header.Authorization": "Bearer t0k"}
    assert not any(word in repr(settings) for word in ("s3cr3t", "k3y", "AKIA", "t0k"))


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


def test_empty_form_fields_count_as_not_given():
    # Airflow's connection form stores an empty custom field as null or "".
    settings = catalog_settings(extra={"catalog": None, "warehouse": "file:///wh", "sqlite": "/tmp/c.db",
                                       "name": ""})
    assert (settings.kind, settings.name, settings.properties["uri"]) == ("sql", "epochs", "sqlite:////tmp/c.db")


@pytest.mark.integration
def test_airflow_knows_the_iceberg_connection_type_and_tests_a_connection(airflow_home, tmp_path, monkeypatch):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from airflow_epochs import get_provider_info
    from airflow_epochs.hooks.iceberg import IcebergCatalogHook

    [declared] = [c for c in get_provider_info()["connection-types"] if c["connection-type"] == "iceberg"]
    assert declared["hook-class-name"] == "airflow_epochs.hooks.iceberg.IcebergCatalogHook"
    assert set(declared["conn-fields"]) == {"catalog", "warehouse", "sqlite", "name"}
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
    airflow = str(Path(sys.executable).parent / "airflow")
    listed = subprocess.run([airflow, "providers", "hooks", "-o", "json"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    hooks = {h["connection_type"]: h for h in json.loads(listed.stdout[listed.stdout.index("["):])}
    assert hooks["iceberg"]["class"] == "airflow_epochs.hooks.iceberg.IcebergCatalogHook"
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


@pytest.mark.parametrize(("extra", "message"), [
    # issue 35: the extras named any warehouse or SQLite path; now canonical locations only
    ({"catalog": "sql", "warehouse": "file:///wh#", "sqlite": "/tmp/c.db"}, "not canonical"),
    ({"catalog": "sql", "warehouse": "/data/../etc", "sqlite": "/tmp/c.db"}, "not canonical"),
    ({"catalog": "sql", "warehouse": "relative/wh", "sqlite": "/tmp/c.db"}, "absolute"),
    ({"catalog": "sql", "warehouse": "file:///wh", "sqlite": "/etc/passwd"}, ".db/.sqlite"),
    ({"catalog": "sql", "warehouse": "file:///wh", "sqlite": "s3://bucket/c.db"}, ".db/.sqlite"),
    ({"catalog": "sql", "warehouse": "file:///wh", "sqlite": "/tmp/c.db?mode=rw"}, "not canonical"),
    ({"catalog": "sql", "warehouse": "file:///wh", "sqlite": "/tmp/c.db", "name": "a b"}, "not a plain name"),
    # REST: only listed names, each value of its shape (no endpoint, proxy, signer or class of one's own)
    ({"catalog": "rest", "s3.endpoint": "http://attacker:9000"}, "'s3.endpoint' is not a REST catalog setting"),
    ({"catalog": "rest", "s3.proxy-uri": "http://proxy"}, "'s3.proxy-uri' is not a REST catalog setting"),
    ({"catalog": "rest", "header.X-Forwarded-Host": "x"}, "not a REST catalog setting"),
    ({"catalog": "rest", "oauth2-server-uri": "http://attacker/token"}, "does not have the shape"),
    ({"catalog": "rest", "s3.region": "eu-west-1/../x"}, "does not have the shape"),
    ({"catalog": "rest", "token-refresh-enabled": "maybe"}, "does not have the shape"),
    ({"catalog": "rest", "credential": "a\nb"}, "value *** does not have the shape"),
])
def test_catalog_extras_are_an_allow_list_with_value_shapes(extra, message):
    with pytest.raises(InvalidInput) as refused:
        catalog_settings(host="h", extra=extra)
    assert message in str(refused.value), str(refused.value)


def test_an_admin_can_hold_catalogs_to_table_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS", f"{tmp_path}/tables,s3://lake/tables")
    inside = {"catalog": "sql", "warehouse": (tmp_path / "tables" / "wh").as_uri(),
              "sqlite": str(tmp_path / "tables" / "c.db")}
    assert catalog_settings(extra=inside).properties["uri"] == f"sqlite:///{tmp_path}/tables/c.db"
    assert catalog_settings(extra={**inside, "warehouse": "s3://lake/tables/wh"}).properties["warehouse"] == \
        "s3://lake/tables/wh"
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "out").symlink_to(tmp_path)  # a link of ours out of the root: resolved, refused
    for bad in ({"sqlite": str(tmp_path / "c.db")}, {"warehouse": "s3://lake/other"},
                {"sqlite": str(tmp_path / "tables" / "out" / "c.db")}):
        with pytest.raises(InvalidInput, match="not inside an allowed table root"):
            catalog_settings(extra={**inside, **bad})
