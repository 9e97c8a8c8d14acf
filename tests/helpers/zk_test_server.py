"""The tests' shared ZooKeeper, secured as the product's: the server ``airflow-epochs zookeeper start``
runs (started here through the same function, in a private state folder), so it requires mutual TLS
(a client certificate only this account can read), every session authenticates with digest
credentials, and ``/`` is our identity's alone. Nothing on it is open to another local user.

One way in for every test:

- ``zk_server.client(chroot, **kazoo_kwargs)``: a started kazoo client (TLS and our credentials; pass
  ``login``/``password`` to be another digest identity instead, ``via`` to go through a proxy,
  ``client_class`` for kazoo's extensions, ``start=False`` for one not yet started);
- ``zk_server.settings(chroot, ...)``: the same as :class:`ZooKeeperSettings`;
- ``zk_server.connection(chroot, ...)``: an Airflow ``zookeeper`` connection (``AIRFLOW_CONN_...`` JSON);
- ``zk_server.cli_args(chroot)``: ``--hosts ...`` for ``airflow-epochs`` commands run with
  ``env=zk_server.env()`` (the CLI finds the credentials and CA through the state folder, as it does for
  a user's embedded server);
- ``zk_server.env()``: the environment for a helper process that connects with
  :func:`connect` (given ``zk_server.address + chroot``).

``zk_server.hosts`` is gone on purpose: a plain ``KazooClient(hosts=...)`` cannot connect to it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.cli.zookeeper import start_server, stop_server
from airflow_epochs.connection.credentials import TLS_FOLDER
from airflow_epochs.connection.embedded import client_settings, running_server, with_embedded_credentials
from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.servers.embedded_zookeeper import four_letter_word
from airflow_epochs.servers.secured_zookeeper import airflow_connection

STATE_ENV = "AIRFLOW_EPOCHS_HOME"
HOSTS_GONE = (
    "zk_server.hosts is gone: the tests' ZooKeeper requires mutual TLS and digest credentials, so a plain "
    "KazooClient(hosts=...) cannot use it. Use zk_server.client(chroot, **kazoo_kwargs) for a started client, "
    "zk_server.settings(chroot) for ZooKeeperSettings, zk_server.connection(chroot) for an Airflow connection, "
    "zk_server.cli_args(chroot) for airflow-epochs commands, zk_server.address + chroot with env=zk_server.env() "
    "for a helper process (tests/helpers/zk_test_server.connect)")


class SharedZooKeeper:
    """The product's detached embedded ZooKeeper, in ``base`` (its CLI state folder).

    :param base: a private folder for the server's state, data, credentials and certificates.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = 0
        self._settings: ZooKeeperSettings | None = None

    def start(self) -> SharedZooKeeper:
        state = start_server(self.base)
        self.port = int(state["port"])
        self._settings = client_settings(self.base, state)
        return self

    def stop(self) -> None:
        stop_server(self.base)

    def serving(self) -> bool:
        return running_server(self.base) is not None

    @property
    def hosts(self) -> str:
        raise AttributeError(HOSTS_GONE)

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, the server's one (TLS) port: what a user's connection or ``--hosts`` names; the
        product adds TLS and the credentials when it finds the server in the state folder."""
        return f"127.0.0.1:{self.port}"

    @property
    def user(self) -> str:
        return str(self._base_settings().login)

    def settings(self, chroot: str = "", *, login: str | None = None, password: str | None = None,
                 via: str | None = None, **extra: Any) -> ZooKeeperSettings:
        """Settings of a client of ``chroot``: TLS with our client certificate, our digest identity (or
        ``login``/``password``'s instead), nodes created with open ACLs as before unless ``use_acl``
        (the server admits only our certificate's holders), through ``via`` (``host:port``) if given.

        :param extra: Airflow connection extras (``session_timeout``, ``read_only``, ``use_acl``...).
        """
        base = self._base_settings()
        identity = (login, password) if login is not None else (base.login, base.password)
        fields = {"use_tls": True, "ca": base.ca, "certfile": base.certfile, "keyfile": base.keyfile,
                  "use_acl": False, **extra}
        settings = ZooKeeperSettings.from_fields(host=(via or self.address) + chroot, login=identity[0],
                                                 password=identity[1], extra=fields)
        return settings

    def client(self, chroot: str = "", *, login: str | None = None, password: str | None = None,
               via: str | None = None, client_class: type[KazooClient] = KazooClient, start: bool = True,
               start_timeout: float = 15.0, **kazoo_kwargs: Any) -> KazooClient:
        """A kazoo client of ``chroot`` (started unless ``start=False``); ``kazoo_kwargs`` go to the client
        (``timeout``, ``connection_retry``, ``read_only``...)."""
        return client_of(self.settings(chroot, login=login, password=password, via=via), client_class=client_class,
                         start=start, start_timeout=start_timeout, **kazoo_kwargs)

    def connection(self, chroot: str = "", *, login: str | None = None, password: str | None = None,
                   via: str | None = None, **extra: Any) -> dict[str, Any]:
        """An Airflow ``zookeeper`` connection (the JSON form) to ``chroot``, with TLS and credentials;
        ``extra`` adds connection extras."""
        settings = self.settings(chroot, login=login, password=password, via=via)
        connection = airflow_connection(settings)
        connection["extra"].update({"use_acl": False, **extra})  # open ACLs inside a test's chroot, as before
        return connection

    def connection_json(self, chroot: str = "", **kwargs: Any) -> str:
        return json.dumps(self.connection(chroot, **kwargs))

    def cli_args(self, chroot: str = "", *, login: str | None = None) -> list[str]:
        """Options of an ``airflow-epochs`` pipeline command for ``chroot`` on this server: as our identity,
        found through the state folder, which must then be in the command's environment (``env=zk_server.env()``,
        or ``monkeypatch.setenv(*zk_server.state_env)`` in process); or as ``login`` (its password in
        ``$AIRFLOW_EPOCHS_ZK_PASSWORD``) with our client certificate."""
        if login is None:
            return ["--hosts", self.address + chroot]
        base = self._base_settings()
        return ["--hosts", self.address + chroot, "--tls", "--ca", str(base.ca), "--certfile", str(base.certfile),
                "--keyfile", str(base.keyfile), "--digest-user", login]

    @property
    def state_env(self) -> tuple[str, str]:
        """The environment variable naming the server's state folder, and its value."""
        return STATE_ENV, str(self.base)

    def env(self, **more: str) -> dict[str, str]:
        """This process's environment, naming the server's state folder (see :func:`connect`)."""
        return {**os.environ, STATE_ENV: str(self.base), **more}

    def four_letter_word(self, word: str = "srvr") -> str:
        """The server's answer to an admin word (over TLS, with our certificate)."""
        base = self._base_settings()
        return four_letter_word(self.port, word, timeout=5.0, ca=base.ca, certfile=base.certfile, keyfile=base.keyfile)

    def server_ssl_context(self) -> ssl.SSLContext:
        """A TLS context that serves as the server does (its certificate; ours required of clients): for a
        proxy in front of it."""
        folder = self.base / "zookeeper" / TLS_FOLDER
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / "server.pem")
        context.load_verify_locations(folder / "ca.pem")
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _base_settings(self) -> ZooKeeperSettings:
        if self._settings is None:
            raise RuntimeError("the tests' ZooKeeper is not started")
        return self._settings


def client_of(settings: ZooKeeperSettings, *, client_class: type[KazooClient] = KazooClient, start: bool = True,
              start_timeout: float = 15.0, **kazoo_kwargs: Any) -> KazooClient:
    """A kazoo client for ``settings`` with ``kazoo_kwargs`` on top (started unless ``start=False``)."""
    client = client_class(**{**settings.kazoo_kwargs(), **kazoo_kwargs})  # kazoo's own logger, as before
    if start:
        client.start(timeout=start_timeout)
    return client


def connect(target: str | ZooKeeperSettings, *, start: bool = True, **kazoo_kwargs: Any) -> KazooClient:
    """A client of ``target`` in a helper (kazoo's own ``KazooClient(hosts=...)`` cannot connect): settings
    (``zk_server.settings(chroot)``, which pickle, for process pools), or in a process started with
    ``env=zk_server.env()`` the text ``zk_server.address + chroot``, whose TLS files and credentials are
    then those of the server the state folder names, found as the product finds them."""
    if isinstance(target, ZooKeeperSettings):
        return client_of(target, start=start, **kazoo_kwargs)
    settings = with_embedded_credentials(ZooKeeperSettings.from_fields(host=target))
    if not settings.use_tls:
        raise RuntimeError(f"{target} is not the tests' ZooKeeper of ${STATE_ENV}={os.environ.get(STATE_ENV)}")
    return client_of(dataclasses.replace(settings, use_acl=False), start=start, **kazoo_kwargs)
