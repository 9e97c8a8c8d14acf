"""The Iceberg catalog a published partition goes to, from an Airflow connection's fields.

Connection type ``iceberg`` (or any type, with the same extras):

- SQL catalog on PostgreSQL: host, port, login, password and schema (the database) of the server;
  extra ``{"catalog": "sql", "warehouse": "file:///data/warehouse"}``.
- SQL catalog on SQLite (demos, one machine): extra ``{"catalog": "sql", "sqlite": "/path/catalog.db",
  "warehouse": ...}``.
- REST catalog: host (an ``https://`` URL, or a host name), port, password (a bearer token); extra
  ``{"catalog": "rest", "warehouse": ..., ...}``: further settings pass through only when their names are
  on :data:`PASSED_THROUGH` (or start with one of :data:`PASSED_THROUGH_PREFIXES`).

Nothing from an extra picks a module or class to load (pyiceberg's ``py-catalog-impl`` / ``py-io-impl``
are not passed through), and the password never appears in an error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from airflow_epochs.coordination.base.errors import InvalidInput

CONN_TYPE = "iceberg"
CATALOG_KINDS = ("sql", "rest")
PASSED_THROUGH = frozenset({"warehouse", "prefix", "credential", "scope", "audience", "resource",
                            "oauth2-server-uri", "token-refresh-enabled"})
PASSED_THROUGH_PREFIXES = ("s3.", "gcs.", "adls.", "header.", "rest.")
_SQL_EXTRAS = frozenset({"catalog", "warehouse", "sqlite", "name"})
_SECRET_WORDS = ("credential", "secret", "password", "token", "authorization", "access-key")


def is_secret_setting(key: str) -> bool:
    """A REST catalog setting that carries a credential: kept in ``secret``, never in ``properties``."""
    return any(word in key.lower() for word in _SECRET_WORDS)


@dataclass(frozen=True)
class CatalogSettings:
    """What :func:`load_catalog` needs: a catalog name and pyiceberg's properties (the secret apart)."""

    name: str
    kind: str
    properties: Mapping[str, str] = field(default_factory=dict)
    secret: Mapping[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        """One line for logs and messages, without credentials."""
        where = self.properties.get("uri", "")
        if "@" in where:
            where = where.split("://", 1)[0] + "://***@" + where.rsplit("@", 1)[1]
        return f"{self.kind} catalog {self.name!r} at {where}"


def catalog_settings(*, host: str | None = None, port: int | None = None, login: str | None = None,
                     password: str | None = None, schema: str | None = None,
                     extra: Mapping[str, Any] | None = None, name: str | None = None) -> CatalogSettings:
    """Build catalog settings from a connection's fields (see the module docstring).

    :raises InvalidInput: an unknown catalog kind or extra, or a field the kind needs is missing.
    """
    # The connection form stores an empty field as null (or ""): such a field is not given.
    extra = {k: v for k, v in (extra or {}).items() if v is not None and v != ""}
    kind = str(extra.get("catalog", "sql"))
    if kind not in CATALOG_KINDS:
        raise InvalidInput(f"Iceberg catalog kind must be one of {list(CATALOG_KINDS)}, not {kind!r}")
    catalog_name = str(name or extra.get("name") or "epochs")
    warehouse = extra.get("warehouse")
    if kind == "sql":
        unknown = sorted(set(extra) - _SQL_EXTRAS)
        if unknown:
            raise InvalidInput(f"unknown extra(s) {unknown} for a SQL Iceberg catalog (allowed: {sorted(_SQL_EXTRAS)})")
        if not warehouse:
            raise InvalidInput("a SQL Iceberg catalog needs extra 'warehouse' (where new table metadata goes)")
        sqlite = extra.get("sqlite")
        if sqlite:
            if host:
                raise InvalidInput("give either a PostgreSQL host or extra 'sqlite', not both")
            uri = f"sqlite:///{sqlite}"
            secret: dict[str, str] = {}
        else:
            if not host or not schema:
                raise InvalidInput("a SQL Iceberg catalog on PostgreSQL needs host and schema (the database)")
            user = quote(login or "", safe="")
            auth = f"{user}:{{password}}@" if password else (f"{user}@" if user else "")
            uri = f"postgresql+psycopg2://{auth}{host}:{int(port or 5432)}/{quote(schema, safe='')}"
            secret = {"password": quote(password, safe="")} if password else {}
        return CatalogSettings(catalog_name, kind, {"type": "sql", "uri": uri, "warehouse": str(warehouse),
                                                    "init_catalog_tables": "true"}, secret)
    properties: dict[str, str] = {"type": "rest"}
    rest_secret: dict[str, str] = {}
    if not host:
        raise InvalidInput("a REST Iceberg catalog needs host (its URL)")
    base = host if "://" in host else f"https://{host}"
    properties["uri"] = f"{base}:{port}" if port and "://" not in host else base
    for key, value in extra.items():
        if key in ("catalog", "name"):
            continue
        if key not in PASSED_THROUGH and not key.startswith(PASSED_THROUGH_PREFIXES):
            raise InvalidInput(f"extra {key!r} is not a REST catalog setting passed through "
                               f"(allowed: {sorted(PASSED_THROUGH)} and {list(PASSED_THROUGH_PREFIXES)}*)")
        if is_secret_setting(key):
            rest_secret[key] = str(value)
        else:
            properties[key] = str(value)
    if password:
        rest_secret["token"] = password
    return CatalogSettings(catalog_name, kind, properties, rest_secret)


def settings_from_connection(conn_id: str) -> CatalogSettings:
    """Catalog settings from the Airflow connection ``conn_id``."""
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    try:
        return catalog_settings(host=conn.host, port=conn.port, login=conn.login, password=conn.password,
                                schema=conn.schema, extra=conn.extra_dejson)
    except InvalidInput as exc:
        raise InvalidInput(f"Iceberg connection {conn_id!r}: {exc}") from None


def load_catalog(settings: CatalogSettings) -> Any:
    """A pyiceberg catalog for ``settings`` (the secret goes in here and nowhere else)."""
    from pyiceberg.catalog import load_catalog as pyiceberg_load_catalog

    properties = dict(settings.properties)
    if settings.kind == "sql" and "password" in settings.secret:
        properties["uri"] = properties["uri"].replace("{password}", settings.secret["password"], 1)
    if settings.kind == "rest":
        properties.update(settings.secret)
    return pyiceberg_load_catalog(settings.name, **properties)
