"""The fault tests' 3-node ZooKeeper ensemble (the ``ensemble`` fixture), secured as the cluster topology's
(:mod:`cluster_topology`) and the tests' shared server (:mod:`zk_test_server`): mutual TLS only (a client
certificate this account alone can read, no plaintext port), digest credentials on every session, ``/``
ours alone, and the members speak mutual TLS to each other (``sslQuorum``). Nothing on it is open to
another local user.

The same one way in as ``zk_server``:

- ``ensemble.client(chroot, members=None, **kazoo_kwargs)``: a started kazoo client of every member (or of
  the member indexes in ``members``), TLS and our credentials; ``via`` goes through a proxy;
- ``ensemble.settings(chroot, members=None, ...)``: the same as :class:`ZooKeeperSettings`;
- ``ensemble.connection(chroot, members=None, ...)`` / ``connection_json``: an Airflow ``zookeeper``
  connection;
- ``ensemble.member(index)``: one member as a server of its own (``settings``, ``client``, ``connection``,
  ``server_ssl_context``), e.g. for :class:`zk_proxy.LostAnswerProxy`.

``ensemble.hosts`` and ``ensemble.member_hosts(i)`` are gone on purpose: a plain ``KazooClient(hosts=...)``
cannot connect to it. Faults as before: ``kill``, ``restart``, ``leader``, ``followers``, ``wait_serving``.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from zk_test_server import client_of

from airflow_epochs.connection.credentials import CREDENTIALS_FILE, TLS_FOLDER
from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.private_files import private_dir
from airflow_epochs.servers.embedded_zookeeper import ZooKeeperEnsemble
from airflow_epochs.servers.secured_zookeeper import airflow_connection, load_or_create_auth
from airflow_epochs.servers.zookeeper_security import ServerTls, ensure_certificates

HOSTS_GONE = (
    "ensemble.hosts is gone: the tests' ensemble requires mutual TLS and digest credentials, so a plain "
    "KazooClient(hosts=...) cannot use it. Use ensemble.client(chroot, members=None, **kazoo_kwargs) for a started "
    "client, ensemble.settings(chroot, members=None) for ZooKeeperSettings, ensemble.connection(chroot, "
    "members=None) for an Airflow connection, ensemble.member(index) for one member (a proxy's upstream)")


class TestEnsemble:
    """A 3-node mutual-TLS ensemble with its state, credentials and certificates in ``base`` (private).

    :param base: a folder of ours for the members' data, the digest credentials and the certificates.
    :param size: members.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, base: Path, size: int = 3) -> None:
        folder = private_dir(base)
        self.auth = load_or_create_auth(folder / CREDENTIALS_FILE)
        self.certificates = ensure_certificates(folder / TLS_FOLDER)
        self.tls = ServerTls(self.certificates.server_keystore, self.certificates.ca, client_auth="need",  # mutual TLS
                             client_cert=self.certificates.client_cert, client_key=self.certificates.client_key)
        self.cluster = ZooKeeperEnsemble(size, directory=folder / "members", tls=self.tls, auth=self.auth,
                                         plaintext_port=False)
        self.members = self.cluster.members
        self.size = size

    # -- lifecycle and faults (the ensemble's own) ----------------------------------------------

    def start(self, timeout: float = 120.0) -> TestEnsemble:
        self.cluster.start(timeout=timeout)
        return self

    def stop(self) -> None:
        self.cluster.stop()

    def kill(self, index: int, **kwargs: Any) -> None:
        self.cluster.kill(index, **kwargs)

    def restart(self, index: int, *, timeout: float = 60.0) -> None:
        self.cluster.restart(index, timeout=timeout)

    def wait_serving(self, indexes: Iterable[int] | None = None, timeout: float = 60.0) -> None:
        self.cluster.wait_serving(indexes, timeout=timeout)

    def leader(self) -> int | None:
        return self.cluster.leader()

    def followers(self) -> list[int]:
        return self.cluster.followers()

    # -- the one way in ------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        raise AttributeError(HOSTS_GONE)

    def member_hosts(self, index: int) -> str:
        raise AttributeError(HOSTS_GONE)

    @property
    def ports(self) -> list[int]:
        """Every member's one (TLS) client port."""
        return [m.client_port for m in self.members]

    def address(self, members: Sequence[int] | None = None) -> str:
        """``127.0.0.1:PORT,...`` of every member (or of ``members``): TLS ports only."""
        indexes = range(self.size) if members is None else members
        return ",".join(f"127.0.0.1:{self.members[i].client_port}" for i in indexes)

    def settings(self, chroot: str = "", *, members: Sequence[int] | None = None, login: str | None = None,
                 password: str | None = None, via: str | None = None, **extra: Any) -> ZooKeeperSettings:
        """Settings of a client of ``chroot`` on ``members`` (default all): TLS with our client certificate and
        the CA, our digest identity (or ``login``/``password``'s), open ACLs in the chroot unless ``use_acl``,
        through ``via`` (``host:port``) if given.

        :param extra: Airflow connection extras (``session_timeout``, ``read_only``, ``use_acl``...).
        """
        identity = (login, password) if login is not None else (self.auth.user, self.auth.password)
        fields = {"use_tls": True, **self.tls.client_files(), "use_acl": False, **extra}
        return ZooKeeperSettings.from_fields(host=(via or self.address(members)) + chroot, login=identity[0],
                                             password=identity[1], extra=fields)

    def client(self, chroot: str = "", *, members: Sequence[int] | None = None, login: str | None = None,
               password: str | None = None, via: str | None = None, client_class: type[KazooClient] = KazooClient,
               start: bool = True, start_timeout: float = 20.0, **kazoo_kwargs: Any) -> KazooClient:
        """A kazoo client of ``chroot`` on ``members`` (started unless ``start=False``); ``kazoo_kwargs`` go to
        the client (``timeout``, ``connection_retry``...)."""
        settings = self.settings(chroot, members=members, login=login, password=password, via=via)
        return client_of(settings, client_class=client_class, start=start, start_timeout=start_timeout,
                         **kazoo_kwargs)

    def connection(self, chroot: str = "", *, members: Sequence[int] | None = None, via: str | None = None,
                   **extra: Any) -> dict[str, Any]:
        """An Airflow ``zookeeper`` connection (the JSON form) to ``chroot`` on ``members``; ``extra`` adds
        connection extras."""
        connection = airflow_connection(self.settings(chroot, members=members, via=via))
        connection["extra"].update({"use_acl": False, **extra})  # open ACLs inside a test's chroot, as before
        return connection

    def connection_json(self, chroot: str = "", **kwargs: Any) -> str:
        return json.dumps(self.connection(chroot, **kwargs))

    def server_ssl_context(self) -> ssl.SSLContext:
        """A TLS context that serves as the members do (their certificate; ours required of clients)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificates.server_keystore)
        context.load_verify_locations(self.certificates.ca)
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def member(self, index: int) -> EnsembleMember:
        """Member ``index`` alone, with the same API (a proxy's upstream, a client bound to one member)."""
        return EnsembleMember(self, index)


class EnsembleMember:
    """One member of a :class:`TestEnsemble`, seen as a server of its own (``zk_server``'s API)."""

    def __init__(self, ensemble: TestEnsemble, index: int) -> None:
        self.ensemble = ensemble
        self.index = index

    @property
    def port(self) -> int:
        return self.ensemble.members[self.index].client_port

    def settings(self, chroot: str = "", **kwargs: Any) -> ZooKeeperSettings:
        return self.ensemble.settings(chroot, members=[self.index], **kwargs)

    def client(self, chroot: str = "", **kwargs: Any) -> KazooClient:
        return self.ensemble.client(chroot, members=[self.index], **kwargs)

    def connection(self, chroot: str = "", **kwargs: Any) -> dict[str, Any]:
        return self.ensemble.connection(chroot, members=[self.index], **kwargs)

    def server_ssl_context(self) -> ssl.SSLContext:
        return self.ensemble.server_ssl_context()
