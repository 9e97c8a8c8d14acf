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
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.servers.dev_certificates import DevCertificates, generate_dev_certificates
from airflow_epochs.servers.private_files import check_private_dir, read_private

__all__ = ["LOCKED_NODES", "MAX_CLIENT_CONNECTIONS", "ServerAuth", "ensure_certificates", "lock_root"]

# The nodes a fresh server lets others write (world:anyone:cdrwa): ours alone from the first start.
LOCKED_NODES = ("/", "/zookeeper", "/zookeeper/quota")
DIGEST_USER = "airflow-epochs"
# No per-address connection limit (ZooKeeper's maxClientCnxns, 60 by default): every local client,
# ours and another user's, comes from 127.0.0.1 (and any local user may pick any 127/8 source), so a
# per-address limit is one another user fills with 60 idle TLS sockets, locking our clients out. Without
# it a flood costs the server a file descriptor a socket (the JVM's limit), and a session that does
# not authenticate is closed at its first request.
MAX_CLIENT_CONNECTIONS = 0
CERTIFICATE_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=2)


@dataclass(frozen=True)
class ServerAuth:
    """The one digest identity a server accepts work from.

    :param user: the digest user name.
    :param password: its password (kept in a 0600 state file; never logged, never on a command line).
    """

    user: str
    password: str

    @classmethod
    def generate(cls, user: str = DIGEST_USER) -> ServerAuth:
        return cls(user=user, password=secrets.token_urlsafe(32))

    @classmethod
    def from_json(cls, data: Any) -> ServerAuth:
        """Credentials recorded by :meth:`to_json`; :class:`ValueError` naming what is wrong otherwise."""
        if not isinstance(data, dict):
            raise ValueError(f"credentials must be an object, not {type(data).__name__}")
        user, password = data.get("user"), data.get("password")
        if not isinstance(user, str) or not user or ":" in user or len(user) > 64:
            raise ValueError(f"credential user {str(user)[:40]!r} is not a digest user name")
        if not isinstance(password, str) or len(password) < 16 or len(password) > 256:
            raise ValueError("credential password is missing or not a generated one")
        return cls(user=user, password=password)

    def to_json(self) -> dict[str, str]:
        return {"user": self.user, "password": self.password}

    def super_digest(self) -> str:
        """``user:digest`` for the server's config (``DigestAuthenticationProvider.superDigest``): our
        identity is ZooKeeper's superuser, so a node another client created or re-ACLed before the lock
        below ran is still ours to lock. Only the digest is written, in the server's 0600 config."""
        from kazoo.security import make_digest_acl_credential

        return str(make_digest_acl_credential(self.user, self.password))

    @staticmethod
    def jvm_properties() -> list[str]:
        """The server's switches: every session must authenticate with ``digest`` before anything else."""
        return ["-Dzookeeper.enforce.auth.enabled=true", "-Dzookeeper.enforce.auth.schemes=digest"]

    def __repr__(self) -> str:  # keep the password out of tracebacks and logs
        return f"ServerAuth(user={self.user!r})"


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


def ensure_certificates(folder: Path) -> DevCertificates:
    """The server's CA and certificate in ``folder`` (0700): the ones there if they are ours, private and
    valid for more than :data:`RENEW_BEFORE`, else new ones (the CA's key is never written: nobody, us
    included, can sign another certificate clients would trust)."""
    files = DevCertificates(ca=folder / "ca.pem", server_keystore=folder / "server.pem",
                            client_cert=folder / "client-cert.pem", client_key=folder / "client-key.pem")
    if folder.exists():
        check_private_dir(folder)
        try:
            if _valid_until(read_private(files.ca)) - RENEW_BEFORE > datetime.datetime.now(datetime.timezone.utc):
                read_private(files.server_keystore, secret=True)  # there, ours and 0600
                return files
        except (FileNotFoundError, ValueError):
            pass
    return generate_dev_certificates(folder, days=CERTIFICATE_DAYS, ca_name="airflow-epochs embedded ZooKeeper CA")


def _valid_until(pem: str) -> datetime.datetime:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc
