"""What makes an embedded ZooKeeper usable only by our clients: enforced digest authentication, a root
node only our identity may touch, and TLS with a CA kept in the server's private folder.

ZooKeeper's enforced authentication (``zookeeper.enforce.auth.enabled``, 3.7 and later) closes the
session of a client that sends any request before authenticating. With the ``digest`` scheme any
user name and password authenticate (digest only names an identity), so the other half is the ACL:
``/`` (and ``/zookeeper``) carry only our digest identity, so another identity can create, read or
list nothing. Our clients create with that same identity's ACL (``use_acl``), so their nodes are
ours alone too.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.private_files import check_private_dir, read_private
from airflow_epochs.servers.dev_certificates import DevCertificates, generate_dev_certificates

__all__ = ["LOCKED_NODES", "MAX_CLIENT_CONNECTIONS", "ServerTls", "ensure_certificates", "lock_root"]

# The nodes a fresh server lets others write (world:anyone:cdrwa): ours alone from the first start.
LOCKED_NODES = ("/", "/zookeeper", "/zookeeper/quota")
# No per-address connection limit (ZooKeeper's maxClientCnxns, 60 by default): every local client,
# ours and another user's, comes from 127.0.0.1 (and any local user may pick any 127/8 source), so a
# per-address limit is one another user fills with 60 idle TLS sockets, locking our clients out. Without
# it a flood costs the server a file descriptor a socket (the JVM's limit), and a session that does
# not authenticate is closed at its first request.
MAX_CLIENT_CONNECTIONS = 0
CERTIFICATE_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=2)


@dataclass(frozen=True)
class ServerTls:
    """What the server needs to serve TLS on a ``secureClientPort``.

    :param keystore: PEM file with the server's private key (PKCS#8, unencrypted) and certificate chain.
    :param truststore: PEM file with the CA certificates the server trusts (for client certificates).
    :param client_auth: ``none``, ``want`` or ``need`` (client certificates).
    :param client_cert: our clients' certificate (signed by the CA); needed with ``need``.
    :param client_key: its key (0600, in the server's private folder).
    """

    keystore: Path
    truststore: Path
    client_auth: str = "none"
    client_cert: Path | None = None
    client_key: Path | None = None

    def __post_init__(self) -> None:
        if self.client_auth not in ("none", "want", "need"):
            raise ValueError(f"client_auth must be none, want or need, not {self.client_auth!r}")
        if self.client_auth == "need" and (self.client_cert is None or self.client_key is None):
            raise ValueError("client_auth 'need' needs our clients' certificate and key (client_cert, client_key)")
        for path in (self.keystore, self.truststore, *(p for p in (self.client_cert, self.client_key) if p)):
            if not Path(path).is_file():
                raise ValueError(f"TLS file {path} does not exist")

    def client_files(self) -> dict[str, str]:
        """``ca`` (and ``certfile``/``keyfile`` when the server asks for a client certificate), as
        absolute paths: what a client of this server is given."""
        files = {"ca": str(Path(self.truststore).resolve())}
        if self.client_auth != "none" and self.client_cert is not None and self.client_key is not None:
            files.update(certfile=str(Path(self.client_cert).resolve()), keyfile=str(Path(self.client_key).resolve()))
        return files


def lock_root(settings: Any) -> None:
    """Give :data:`LOCKED_NODES` and every other top-level node our identity's ACL alone (idempotent: a
    restart finds them so). Between the server answering and this lock, ``/`` is ZooKeeper's default
    (open to any authenticated session, and any made-up digest authenticates): a node another local
    user created in that window is taken over here, which our superuser identity may always do.

    :param settings: a :class:`~airflow_epochs.connection.zookeeper.ZooKeeperSettings` with the server's
        digest credentials.
    :raises PermissionError: the data was locked by other credentials (a state file lost or replaced).
    """
    from kazoo.exceptions import NoAuthError
    from kazoo.security import make_digest_acl

    mine = [make_digest_acl(settings.login, settings.password, all=True)]
    client = settings.start_client()
    try:
        planted = [f"/{name}" for name in client.get_children("/") if f"/{name}" not in LOCKED_NODES]
        for path in (*LOCKED_NODES, *planted):
            acl, _stat = client.get_acls(path)
            if list(acl) == mine:
                continue
            try:
                client.set_acls(path, mine)
            except NoAuthError:
                raise PermissionError(
                    f"ZooKeeper node {path} belongs to other credentials than the ones in this state folder: the "
                    "data was created by a server whose credentials were lost; move its folder away") from None
    finally:
        client.stop()
        client.close()


def certificate_files(folder: Path) -> DevCertificates:
    """Where the server's CA, certificate and our client's certificate and key are kept in ``folder``."""
    return DevCertificates(ca=folder / "ca.pem", server_keystore=folder / "server.pem",
                           client_cert=folder / "client-cert.pem", client_key=folder / "client-key.pem")


def ensure_certificates(folder: Path) -> DevCertificates:
    """The server's CA and certificate in ``folder`` (0700): the ones there if they are ours, private and
    valid for more than :data:`RENEW_BEFORE`, else new ones (the CA's key is never written: nobody, us
    included, can sign another certificate clients would trust)."""
    files = certificate_files(folder)
    if folder.exists():
        check_private_dir(folder)
        try:
            if _valid_until(read_private(files.ca)) - RENEW_BEFORE > datetime.datetime.now(datetime.timezone.utc):
                for secret in (files.server_keystore, files.client_key):
                    read_private(secret, secret=True)  # there, ours and 0600
                read_private(files.client_cert)
                return files
        except (FileNotFoundError, ValueError):
            pass
    return generate_dev_certificates(folder, days=CERTIFICATE_DAYS, ca_name="airflow-epochs embedded ZooKeeper CA")


def _valid_until(pem: str) -> datetime.datetime:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc
