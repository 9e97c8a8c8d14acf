"""Catalog settings from a connection's fields: allow-listed extras, the secret kept out of messages;
and the lineage of a Spark epoch task that read sealed partitions (real ZooKeeper, no Spark needed).

(The server-free tests of integration/test_tables_catalog.py.)"""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import InvalidInput
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


def test_empty_form_fields_count_as_not_given():
    # Airflow's connection form stores an empty custom field as null or "".
    settings = catalog_settings(extra={"catalog": None, "warehouse": "file:///wh", "sqlite": "/tmp/c.db",
                                       "name": ""})
    assert (settings.kind, settings.name, settings.properties["uri"]) == ("sql", "epochs", "sqlite:////tmp/c.db")


