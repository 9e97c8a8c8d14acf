"""Airflow connection fields -> kazoo client arguments (pure logic, no Airflow import).

Only known extras are accepted: an unknown key is an error, so a connection can never smuggle
arbitrary arguments into the client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

DEFAULT_PORT = 2181
_LEGACY_PREFIX = "extra__zookeeper__"
_BOOL_EXTRAS = ("use_acl", "use_tls", "verify_certs", "check_hostname", "read_only")
_NUMBER_EXTRAS = ("session_timeout", "connection_timeout")
_STRING_EXTRAS = ("ca", "certfile", "keyfile", "keyfile_password")
_KNOWN = set(_BOOL_EXTRAS + _NUMBER_EXTRAS + _STRING_EXTRAS)


class InvalidConnection(ValueError):
    """A ZooKeeper connection's fields cannot be turned into a client."""


@dataclass(frozen=True)
class ZooKeeperSettings:
    """Validated settings of one ZooKeeper connection."""

    hosts: tuple[str, ...]
    chroot: str = ""
    login: str | None = None
    password: str | None = None
    session_timeout: float = 10.0
    connection_timeout: float = 15.0
    use_acl: bool = False
    use_tls: bool = False
    ca: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = None
    verify_certs: bool = True
    check_hostname: bool = True
    read_only: bool = False

    @classmethod
    def from_fields(
        cls,
        *,
        host: str | None,
        port: int | None = None,
        schema: str | None = None,
        login: str | None = None,
        password: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ZooKeeperSettings:
        """Build settings from an Airflow connection's fields.

        :param host: ``host[:port]`` items separated by commas; a chroot may follow the last one
            (``a:2181,b:2181/app``) or be given as ``schema``.
        :param port: default port for hosts given without one (2181 if unset).
        """
        if not host or not host.strip():
            raise InvalidConnection("a ZooKeeper connection needs at least one host (e.g. 'zk1:2181,zk2:2181')")
        chroot = ""
        text = host.strip()
        if "/" in text:
            text, _, rest = text.partition("/")
            chroot = "/" + rest
        if schema:
            if chroot:
                raise InvalidConnection(f"chroot given twice: in hosts ({chroot!r}) and as schema ({schema!r})")
            chroot = schema if schema.startswith("/") else "/" + schema
        chroot = chroot.rstrip("/")
        if chroot and (
            "//" in chroot or any(seg in (".", "..") for seg in chroot.split("/")[1:])
            or any(not ch.isprintable() for ch in chroot)
        ):
            raise InvalidConnection(f"invalid chroot {chroot!r}")
        default_port = int(port) if port else DEFAULT_PORT
        hosts = []
        for item in text.split(","):
            item = item.strip()
            if not item:
                raise InvalidConnection(f"empty entry in hosts {host!r}")
            name, sep, port_text = item.rpartition(":") if item.count(":") == 1 else (item, "", "")
            if not sep:
                name, port_text = item, str(default_port)
            if not name or not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InvalidConnection(f"invalid host entry {item!r} in {host!r} (expected host:port)")
            hosts.append(f"{name}:{int(port_text)}")
        if bool(login) != bool(password):
            raise InvalidConnection("digest authentication needs both a login and a password")
        values = _normalise_extras(extra or {})
        if values.get("use_acl") and not login:
            raise InvalidConnection("use_acl needs digest credentials (login and password)")
        if not values.get("use_tls", False) and any(values.get(k) for k in _STRING_EXTRAS):
            raise InvalidConnection("ca/certfile/keyfile are set but use_tls is false")
        return cls(hosts=tuple(hosts), chroot=chroot, login=login or None, password=password or None, **values)

    @property
    def connect_string(self) -> str:
        return ",".join(self.hosts) + self.chroot

    def kazoo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`kazoo.client.KazooClient`."""
        kwargs: dict[str, Any] = {
            "hosts": self.connect_string,
            "timeout": self.session_timeout,
            "read_only": self.read_only,
        }
        if self.login and self.password:
            credential = f"{self.login}:{self.password}"
            kwargs["auth_data"] = [("digest", credential)]
            if self.use_acl:
                kwargs["default_acl"] = [make_digest_acl(self.login, self.password, all=True)]
        if self.use_tls:
            kwargs.update(
                use_ssl=True,
                ca=self.ca,
                certfile=self.certfile,
                keyfile=self.keyfile,
                keyfile_password=self.keyfile_password,
                verify_certs=self.verify_certs,
                check_hostname=self.check_hostname,
            )
        return kwargs

    def client(self) -> KazooClient:
        """A new (not yet started) kazoo client for these settings, logging through a logger that
        redacts credentials (kazoo logs its Auth request, password included, at DEBUG level)."""
        return KazooClient(logger=redacting_logger(), **self.kazoo_kwargs())

    def describe(self) -> str:
        """A log-safe description: never the password or the key password."""
        parts = [self.connect_string]
        if self.login:
            parts.append(f"digest user {self.login!r}")
        if self.use_tls:
            parts.append("TLS" + ("" if self.verify_certs else " (unverified)"))
        if self.read_only:
            parts.append("read-only allowed")
        return ", ".join(parts)

    def __repr__(self) -> str:  # keep secrets out of tracebacks and logs
        return f"ZooKeeperSettings({self.describe()})"


def _normalise_extras(extra: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for raw_key, value in extra.items():
        key = raw_key[len(_LEGACY_PREFIX):] if raw_key.startswith(_LEGACY_PREFIX) else raw_key
        if key not in _KNOWN:
            raise InvalidConnection(f"unknown ZooKeeper connection extra {raw_key!r}; known: {sorted(_KNOWN)}")
        if value is None or value == "":
            continue
        if key in _BOOL_EXTRAS:
            values[key] = _as_bool(key, value)
        elif key in _NUMBER_EXTRAS:
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise InvalidConnection(f"extra {key!r} must be a number of seconds, not {value!r}") from None
            if not 0 < number <= 3600:
                raise InvalidConnection(f"extra {key!r} must be between 0 and 3600 seconds, not {value!r}")
            values[key] = number
        else:
            if not isinstance(value, str):
                raise InvalidConnection(f"extra {key!r} must be a string, not {type(value).__name__}")
            values[key] = value
    return values


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        return value.strip().lower() in ("true", "1", "yes", "on")
    raise InvalidConnection(f"extra {key!r} must be true or false, not {value!r}")


_AUTH = re.compile(r"auth=(['\"]).*?\1|auth=b(['\"]).*?\2")


class _RedactCredentials(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "auth=" in message:
            record.msg = _AUTH.sub("auth='***'", message)
            record.args = None
        return True


def redacting_logger() -> logging.Logger:
    """The logger kazoo clients of this package log through, with credentials redacted."""
    logger = logging.getLogger("airflow_epochs.kazoo")
    if not any(isinstance(f, _RedactCredentials) for f in logger.filters):
        logger.addFilter(_RedactCredentials())
    return logger
