"""ZooKeeperHook: an Airflow connection of type ``zookeeper`` -> a started kazoo client."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from airflow.sdk import BaseHook
from kazoo.client import KazooClient

from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings
from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger
from airflow_epochs.hooks.ledgers import ledger_on


def settings_of(conn: Any) -> ZooKeeperSettings:
    """The client settings of a ``zookeeper`` connection (Airflow's or the Task SDK's ``Connection``).

    A connection without credentials to the CLI's embedded server gets that server's (it accepts no
    client without them), over TLS checked against its CA.
    """
    from airflow_epochs.connection.embedded import with_embedded_credentials

    return with_embedded_credentials(ZooKeeperSettings.from_fields(
        host=conn.host, port=conn.port, schema=conn.schema, login=conn.login, password=conn.password,
        extra=conn.extra_dejson,
    ))


class ZooKeeperHook(BaseHook):
    """Connect to a ZooKeeper ensemble described by an Airflow connection.

    Connection fields: *host* is a comma-separated ``host:port`` list, *port* the default port,
    *schema* an optional chroot, *login*/*password* digest credentials; extras: ``session_timeout``,
    ``connection_timeout``, ``use_acl``, ``use_tls``, ``ca``, ``certfile``, ``keyfile``,
    ``keyfile_password``, ``verify_certs``, ``check_hostname`` (on by default with TLS), ``read_only``.

    The client is built on first use (never at DAG parse time) and closed by :meth:`close` or on
    leaving a ``with`` block.

    :param zookeeper_conn_id: the connection id.
    :param connect_timeout: seconds to wait for a session when connecting (None: the connection's
        ``connection_timeout``).
    """

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = "zookeeper_default"
    conn_type = "zookeeper"
    hook_name = "ZooKeeper"

    def __init__(
        self, zookeeper_conn_id: str = default_conn_name, *, connect_timeout: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.connect_timeout = connect_timeout
        self._client: KazooClient | None = None
        self._settings: ZooKeeperSettings | None = None

    @property
    def settings(self) -> ZooKeeperSettings:
        if self._settings is None:
            self._settings = settings_of(self.get_connection(self.zookeeper_conn_id))
        return self._settings

    def get_conn(self) -> KazooClient:
        """The started kazoo client (built and connected on first call)."""
        if self._client is None:
            settings = self.settings
            self.log.info("Connecting to ZooKeeper %s", settings.describe())
            self._client = settings.start_client(timeout=self.connect_timeout)
        return self._client

    def ledger(self, pipeline: str, *, owner: str = "anonymous", root: str = DEFAULT_ROOT) -> EpochLedger:
        """The epoch ledger of ``pipeline`` on this connection's client: the one way the provider's
        operators, sensors and DAGs get a ledger.

        :param owner: identity recorded on the attempts the ledger opens (readers need none).
        :param root: the znode under which pipelines live.
        """
        return ledger_on(self.get_conn(), pipeline, owner=owner, root=root)

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.stop()
                self._client.close()
            finally:
                self._client = None

    def __enter__(self) -> ZooKeeperHook:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        """Really connect (TLS and credentials included), read the root node, and disconnect.

        The server version comes from the ``srvr`` four-letter word, over TLS when the connection uses
        it (kazoo's own ``server_version()`` needs ``envi`` and cannot check a TLS host name); a server
        that does not answer it is still a working connection.
        """
        try:
            settings = self.settings
        except InvalidConnection as exc:
            return False, f"Invalid ZooKeeper connection: {exc}"
        try:
            client = settings.start_client(timeout=min(settings.connection_timeout, 10.0))
        except Exception as exc:  # noqa: BLE001 - every failure becomes the test's message
            return False, f"Could not connect to ZooKeeper at {settings.describe()}: {type(exc).__name__}: {exc}"
        try:
            client.exists("/")  # a real request through the session, over TLS if configured
            version = settings.server_version()
            return True, f"Connected to ZooKeeper{f' {version}' if version else ''} at {settings.describe()}"
        except Exception as exc:  # noqa: BLE001 - every failure becomes the test's message
            return False, f"Could not read from ZooKeeper at {settings.describe()}: {type(exc).__name__}: {exc}"
        finally:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001, S110 - closing a failed client must not mask the result
                pass
