"""The Iceberg catalog a published partition goes to, from an Airflow connection's fields.

Connection type ``iceberg`` (or any type, with the same extras):

- SQL catalog on PostgreSQL: host, port, login, password and schema (the database) of the server;
  extra ``{"catalog": "sql", "warehouse": "file:///data/warehouse"}``.
- SQL catalog on SQLite (demos, one machine): extra ``{"catalog": "sql", "sqlite": "/path/catalog.db",
  "warehouse": ...}``.
- REST catalog: host (an ``https://`` URL, or a host name), port, password (a bearer token); extra
  ``{"catalog": "rest", "warehouse": ..., ...}``: further settings pass through only when their names are
  on :data:`REST_SETTINGS` and their values have the shape it gives.

A SQL catalog's ``warehouse`` and ``sqlite`` must be canonical locations
(:func:`~airflow_epochs.coordination.base.locations.parse_location`) inside one of the roots the admin lists in
``[epochs] allowed_table_roots``: an allow-list, closed when unset (no catalog keeps data anywhere until the
admin names where).

Nothing from an extra picks a module or class to load (pyiceberg's ``py-catalog-impl`` / ``py-io-impl``
are not passed through), and the password never appears in an error message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.path_trust import UntrustedPath, resolve_trusted
from airflow_epochs.spark.locations import Location, parse_location
from airflow_epochs.spark.submit_options import listed_setting

CONN_TYPE = "iceberg"
CATALOG_KINDS = ("sql", "rest")
_ANY_TEXT = r"[^\x00-\x1f\x7f]{1,4096}"  # a credential's shape: any one line
_PLAIN = r"[A-Za-z0-9_.:@/+-]{1,512}"
_BOOL = r"true|false"
_REGION = r"[a-z0-9-]{1,64}"
#: Every REST extra a connection may carry, with the shape of its value (an allow-list of names and
#: shapes: nothing picks a class, a file, a proxy or an endpoint other than the catalog's own).
REST_SETTINGS: dict[str, str] = {
    "warehouse": _PLAIN, "prefix": r"[A-Za-z0-9_.-]{1,128}", "credential": _ANY_TEXT,
    "scope": r"[A-Za-z0-9_:. -]{1,512}", "audience": _PLAIN, "resource": _PLAIN,
    "oauth2-server-uri": r"https://[a-z0-9.-]{1,253}(:[0-9]{1,5})?(/[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)*/?",
    "token-refresh-enabled": _BOOL,
    "s3.region": _REGION, "s3.access-key-id": _ANY_TEXT, "s3.secret-access-key": _ANY_TEXT,
    "s3.session-token": _ANY_TEXT,
    "gcs.project-id": r"[a-z][a-z0-9-]{1,62}", "gcs.oauth2.token": _ANY_TEXT,
    "adls.account-name": r"[a-z0-9]{3,24}", "adls.account-key": _ANY_TEXT, "adls.sas-token": _ANY_TEXT,
    "header.X-Iceberg-Access-Delegation": r"(vended-credentials|remote-signing)(,(vended-credentials|remote-signing))?",
    "header.Authorization": _ANY_TEXT,
    "rest.sigv4-enabled": _BOOL, "rest.signing-region": _REGION, "rest.signing-name": r"[a-z0-9-]{1,64}",
}
# The names of REST_SETTINGS.
PASSED_THROUGH = frozenset(REST_SETTINGS)
_SQL_EXTRAS = frozenset({"catalog", "warehouse", "sqlite", "name"})
_CATALOG_NAME = r"[A-Za-z0-9_-]{1,64}"
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SECRET_WORDS = ("credential", "secret", "password", "token", "authorization", "access-key", "account-key")


class CatalogSettingRefused(InvalidInput):
    """A connection extra of the Iceberg catalog is not on the allow-list or not of its shape."""


class NoTableRoots(CatalogSettingRefused):
    """``[epochs] allowed_table_roots`` is unset: no SQL catalog may keep data anywhere."""


def table_roots() -> list[Location]:
    """Where an admin lets catalogs keep data (``[epochs] allowed_table_roots``, comma-separated canonical
    locations); none set: nowhere."""
    listed = sorted(listed_setting("allowed_table_roots"))
    return [parse_location("[epochs] allowed_table_roots", root) for root in listed]


def _check_table_location(what: str, value: object, *, sqlite: bool = False) -> str:
    """``value`` if it is a canonical location (for ``sqlite`` a local ``.db``/``.sqlite`` file path) inside
    an allowed table root (resolved through trusted links only on a local disk); none allowed: refused."""
    try:
        location = parse_location(f"extra {what!r}", value)
    except InvalidInput as exc:
        raise CatalogSettingRefused(str(exc)) from None
    if sqlite and (not location.local or "://" in location.text or not location.path.endswith(_SQLITE_SUFFIXES)):
        raise CatalogSettingRefused(f"extra 'sqlite' {value!r} must be an absolute local path of a "
                                    f"{'/'.join(_SQLITE_SUFFIXES)} file")
    roots = table_roots()
    if not roots:
        raise NoTableRoots(f"extra {what!r} {value!r} is refused: no table roots are allowed; an admin lists where "
                           "Iceberg catalogs may keep data in [epochs] allowed_table_roots (AIRFLOW__EPOCHS__ALLOWED_"
                           "TABLE_ROOTS), comma-separated canonical locations such as /data/tables,s3://lake/tables")
    if not any(root.contains(location) and (not location.local or _really_inside(root, location))
                         for root in roots):
        raise CatalogSettingRefused(f"extra {what!r} {value!r} is not inside an allowed table root "
                                    f"({', '.join(root.text for root in roots)}: [epochs] allowed_table_roots)")
    return location.text


def _really_inside(root: Location, location: Location) -> bool:
    try:
        real_root = resolve_trusted(root.path).rstrip("/")
        return resolve_trusted(location.path).startswith(real_root + "/")
    except UntrustedPath:
        return False


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
    if not re.fullmatch(_CATALOG_NAME, catalog_name):
        raise CatalogSettingRefused(f"Iceberg catalog name {catalog_name!r} is not a plain name ({_CATALOG_NAME})")
    warehouse = extra.get("warehouse")
    if kind == "sql":
        unknown = sorted(set(extra) - _SQL_EXTRAS)
        if unknown:
            raise InvalidInput(f"unknown extra(s) {unknown} for a SQL Iceberg catalog (allowed: {sorted(_SQL_EXTRAS)})")
        if not warehouse:
            raise InvalidInput("a SQL Iceberg catalog needs extra 'warehouse' (where new table metadata goes)")
        warehouse = _check_table_location("warehouse", warehouse)
        sqlite = extra.get("sqlite")
        if sqlite:
            sqlite = _check_table_location("sqlite", sqlite, sqlite=True)
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
        if key not in REST_SETTINGS:
            raise CatalogSettingRefused(f"extra {key!r} is not a REST catalog setting passed through "
                                        f"(allowed: {sorted(REST_SETTINGS)})")
        if not isinstance(value, (str, int, bool)) or not re.fullmatch(
                REST_SETTINGS[key], str(value).lower() if isinstance(value, bool) else str(value)):
            shown = "***" if is_secret_setting(key) else repr(value)
            raise CatalogSettingRefused(f"extra {key!r} value {shown} does not have the shape of the setting")
        if is_secret_setting(key):
            rest_secret[key] = str(value)
        else:
            properties[key] = str(value)
    if password:
        rest_secret["token"] = password
    return CatalogSettings(catalog_name, kind, properties, rest_secret)


def settings_from_connection(conn_id: str) -> CatalogSettings:
    """Catalog settings from the Airflow connection ``conn_id`` (the Task SDK's lookup, in a task)."""
    from airflow.sdk import BaseHook

    return settings_of_connection(BaseHook.get_connection(conn_id), conn_id)


def settings_of_connection(conn: Any, conn_id: str) -> CatalogSettings:
    """Catalog settings from the fields of the Airflow connection ``conn`` (named ``conn_id``)."""
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
