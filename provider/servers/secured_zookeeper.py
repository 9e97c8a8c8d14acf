"""An embedded ZooKeeper only our clients can use, kept in one private folder across restarts: digest
credentials generated at its first start (``credentials.json``, 0600), enforced authentication, ``/``
ours alone, and TLS with a CA generated into ``tls/`` (plaintext only when asked for).

The demo and ``airflow-epochs zookeeper start`` both start their server this way, with the same files:
``<folder>/credentials.json`` and ``<folder>/tls/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, ServerTls
from airflow_epochs.servers.private_files import private_dir, read_private, write_private
from airflow_epochs.servers.zookeeper_security import MAX_CLIENT_CONNECTIONS, ServerAuth, ensure_certificates

__all__ = ["CREDENTIALS_FILE", "TLS_FOLDER", "airflow_connection", "load_or_create_auth", "read_auth",
           "secured_server"]

CREDENTIALS_FILE = "credentials.json"
TLS_FOLDER = "tls"


def read_auth(path: Path) -> ServerAuth | None:
    """The credentials in ``path`` (a 0600 file of ours: :class:`UnsafeState` if not), None if there is
    none; a one-line :class:`ValueError` naming the file if it is corrupt."""
    from airflow_epochs.coordination.wire.payloads import loads_bounded

    try:
        text = read_private(path, secret=True)
    except FileNotFoundError:
        return None
    try:
        return ServerAuth.from_json(loads_bounded(text))
    except ValueError as exc:
        raise ValueError(f"{path} is corrupt ({exc}): remove it, and the server's data with it") from None


def load_or_create_auth(path: Path) -> ServerAuth:
    """The credentials in ``path`` (a 0600 file of ours), or new ones written there first."""
    auth = read_auth(path)
    if auth is None:
        auth = ServerAuth.generate()
        write_private(path, json.dumps(auth.to_json()))
    return auth


def secured_server(directory: str | Path, *, port: int | None = None, secure_port: int | None = None,
                   plaintext: bool = False, **kwargs: Any) -> EmbeddedZooKeeper:
    """An :class:`EmbeddedZooKeeper` (not started) in ``directory`` that requires our credentials and
    serves TLS only, on ``secure_port`` (its ``port`` is then that one too), unless ``plaintext``: then
    plaintext only, on ``port``. Its :meth:`~EmbeddedZooKeeper.client_settings` connect to it.

    :param kwargs: passed on to :class:`EmbeddedZooKeeper` (``die_with_parent``, ``heap_mb``...); no
        per-address connection limit unless ``max_client_connections`` says (see
        :data:`~airflow_epochs.servers.zookeeper_security.MAX_CLIENT_CONNECTIONS`).
    """
    kwargs.setdefault("max_client_connections", MAX_CLIENT_CONNECTIONS)
    folder = private_dir(directory)
    auth = load_or_create_auth(folder / CREDENTIALS_FILE)
    tls = None
    if not plaintext:
        certificates = ensure_certificates(folder / TLS_FOLDER)
        tls = ServerTls(certificates.server_keystore, certificates.ca)
    # With TLS it opens no plaintext port at all (``port`` is then unused): nothing to send a password to
    # in clear, and nothing for a session that skips TLS to talk to.
    if tls is not None and secure_port is None:
        secure_port = port  # the one port named: serve it
    return EmbeddedZooKeeper(directory=folder, port=port if plaintext else None,
                             secure_port=secure_port if tls else None, auth=auth, tls=tls,
                             plaintext_port=plaintext, **kwargs)


def airflow_connection(settings: ZooKeeperSettings) -> dict[str, Any]:
    """An Airflow ``zookeeper`` connection (the JSON form of ``AIRFLOW_CONN_...``) for these settings."""
    extra: dict[str, Any] = {}
    if settings.use_tls:
        extra.update(use_tls=True, ca=settings.ca)
    connection: dict[str, Any] = {"conn_type": "zookeeper", "host": settings.connect_string, "extra": extra}
    if settings.login:
        connection.update(login=settings.login, password=settings.password)
    return connection
