"""The ``iceberg`` connection type: the Iceberg catalog sealed partitions are published to.

It lives beside the catalog code it reads its settings with. Fields as
:mod:`airflow_epochs.tables.catalog` reads them: a SQL catalog on PostgreSQL (host, port,
login, password, schema = the database), on SQLite (extra ``sqlite``), or a REST catalog (host = its
URL, password = a bearer token); extra ``catalog`` (``sql`` or ``rest``), ``warehouse`` and ``name``.
The module imports without the ``tables`` extra (Airflow lists connection types by importing hooks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow_epochs.tables.catalog import CatalogSettings


class IcebergCatalogHook(BaseHook):
    """An Iceberg catalog from an Airflow connection; the catalog is loaded on first use.

    :param iceberg_conn_id: the connection id.
    """

    conn_name_attr = "iceberg_conn_id"
    default_conn_name = "iceberg_default"
    conn_type = "iceberg"  # airflow_epochs.tables.catalog.CONN_TYPE; not imported: it needs the tables extra
    hook_name = "Iceberg catalog (Epochs)"

    def __init__(self, iceberg_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.iceberg_conn_id = iceberg_conn_id
        self._settings: CatalogSettings | None = None
        self._catalog: Any = None

    @property
    def settings(self) -> CatalogSettings:
        """The catalog settings of the connection (the password kept apart, never in messages)."""
        if self._settings is None:
            from airflow_epochs.tables.catalog import catalog_settings

            conn = self.get_connection(self.iceberg_conn_id)
            self._settings = catalog_settings(host=conn.host, port=conn.port, login=conn.login,
                                              password=conn.password, schema=conn.schema, extra=conn.extra_dejson)
        return self._settings

    def get_conn(self) -> Any:
        """The pyiceberg catalog (loaded on first call)."""
        if self._catalog is None:
            from airflow_epochs.tables.catalog import load_catalog

            self.log.info("Loading the Iceberg catalog: %s", self.settings.describe())
            self._catalog = load_catalog(self.settings)
        return self._catalog

    def test_connection(self) -> tuple[bool, str]:
        """Whether the catalog answers (lists its namespaces); the message names no credential."""
        try:
            namespaces = self.get_conn().list_namespaces()
        except Exception as exc:  # noqa: BLE001 - Airflow's "Test" button shows any failure as text
            return False, f"{type(exc).__name__}: {next(iter(str(getattr(exc, 'orig', None) or exc).splitlines()), '')}"
        return True, f"{self.settings.describe()}: {len(namespaces)} namespace(s)"
