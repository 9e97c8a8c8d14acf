"""An embedded ZooKeeper only our clients can use, kept in one private folder across restarts: digest
credentials generated at its first start (``credentials.json``, 0600), enforced authentication, ``/``
ours alone, and mutual TLS with a CA and our clients' certificate generated into ``tls/`` (plaintext
only when asked for).

The demo and ``airflow-epochs zookeeper start`` both start their server this way, with the same files:
``<folder>/credentials.json`` and ``<folder>/tls/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_epochs.connection.credentials import CREDENTIALS_FILE, TLS_FOLDER, ServerAuth, read_auth
from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.private_files import private_dir, write_private
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, ServerTls
from airflow_epochs.servers.zookeeper_security import MAX_CLIENT_CONNECTIONS, ensure_certificates

__all__ = ["airflow_connection", "load_or_create_auth", "secured_server"]

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
        # Mutual TLS: a client must show the certificate kept in this 0700 folder, so no other local user
        # completes a handshake (nor sends a request, a watch or a password guess).
        tls = ServerTls(certificates.server_keystore, certificates.ca, client_auth="need",
                        client_cert=certificates.client_cert, client_key=certificates.client_key)
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
        if settings.certfile and settings.keyfile:
            extra.update(certfile=settings.certfile, keyfile=settings.keyfile)
    connection: dict[str, Any] = {"conn_type": "zookeeper", "host": settings.connect_string, "extra": extra}
    if settings.login:
        connection.update(login=settings.login, password=settings.password)
    return connection
