"""The embedded server's digest credentials: their format and the 0600 file that keeps them.

Below both the development servers (which generate and enforce them) and the clients that read
them (the hook, the triggers and the command line talking to the server ``airflow-epochs zookeeper
start`` runs), so a client finds them without importing a server.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.private_files import read_private

__all__ = ["CREDENTIALS_FILE", "DIGEST_USER", "TLS_FOLDER", "ServerAuth", "read_auth"]

CREDENTIALS_FILE = "credentials.json"  # in the server's private folder
TLS_FOLDER = "tls"  # beside it: the CA and our clients' certificate
DIGEST_USER = "airflow-epochs"


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
