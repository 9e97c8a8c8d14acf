"""Iceberg catalog settings from a connection's fields, without a catalog: allow-listed extras, empty
form fields, and secrets kept apart from the visible properties."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.tables import catalog_settings
from airflow_epochs.tables.catalog import NoTableRoots


@pytest.fixture(autouse=True)
def table_roots(monkeypatch):
    """Roots that let these examples through (the setting is an allow-list, closed when unset): they are
    about the shape of the extras; the roots have tests of their own below."""
    monkeypatch.setenv("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS", "/,s3://bucket/tables")


def test_without_allowed_table_roots_no_catalog_keeps_data_anywhere(monkeypatch):
    """Issue 35: ``[epochs] allowed_table_roots`` unset was open (any canonical location); now closed, and the
    refusal names the setting."""
    monkeypatch.delenv("AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS")
    for extra in ({"catalog": "sql", "warehouse": "file:///wh", "sqlite": "/tmp/c.db"},
                  {"catalog": "sql", "warehouse": "s3://bucket/tables/wh"}):
        with pytest.raises(NoTableRoots, match=r"no table roots are allowed.*\[epochs\] allowed_table_roots"):
            catalog_settings(host="h", extra=extra)


def test_postgres_settings_keep_the_password_apart():
    settings = catalog_settings(host="db.internal", port=5433, login="ice", password="s3cr@t/pw", schema="lake",
                                extra={"catalog": "sql", "warehouse": "s3://bucket/tables/wh"})
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
