"""Airflow connection fields -> kazoo client arguments (pure logic, no Airflow import).

Only known extras are accepted: an unknown key is an error, so a connection can never smuggle
arbitrary arguments into the client.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import make_digest_acl

from airflow_epochs.connection.kazoo_log import ReconnectFolding
from airflow_epochs.connection.socket_census import Flood, flood_on
from airflow_epochs.coordination.base.errors import CoordinationUnavailable
from airflow_epochs.redaction import RedactingFilter, register_secret

DEFAULT_PORT = 2181
CONNECT_RETRY_MAX_DELAY = 1.0  # seconds between a client's connection tries, at most
_LEGACY_PREFIX = "extra__zookeeper__"
_BOOL_EXTRAS = ("use_acl", "use_tls", "verify_certs", "check_hostname", "read_only")
_NUMBER_EXTRAS = ("session_timeout", "connection_timeout")
_STRING_EXTRAS = ("ca", "certfile", "keyfile", "keyfile_password")
_KNOWN = set(_BOOL_EXTRAS + _NUMBER_EXTRAS + _STRING_EXTRAS)


class InvalidConnection(ValueError):
    """A ZooKeeper connection's fields cannot be turned into a client."""


class TlsHandshakeFailed(InvalidConnection):
    """The server's certificate was refused (wrong CA, host name not in the certificate, expired...) or
    the server does not speak TLS on that port: a configuration error, not an outage."""


def _reason(exc: OSError) -> str:
    return str(getattr(exc, "reason", None) or exc.strerror or exc)


def closes_new_connections(host: str, port: int, *, timeout: float = 5.0) -> bool:
    """Whether the server at ``host:port`` closes a new connection that has sent nothing yet, as ZooKeeper
    does at its per-address connection limit (a server that merely does not speak TLS keeps a silent
    connection open, waiting for a request)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(min(timeout, 2.0))
            return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except OSError:  # timed out waiting: the connection stays open
        return False


class ConnectionsRefused(TlsHandshakeFailed):
    """The server closed our connections before the TLS handshake, as it does to every new connection
    from an address that already holds its per-address limit (``maxClientCnxns``): most likely other
    connections from this address (another local user's idle sockets, a leaking client) use them up."""


class ZooKeeperUnreachable(CoordinationUnavailable):
    """No ZooKeeper server of the connection answered within the connection timeout."""


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
        if chroot:
            # Checked like a --root: a chroot under /zookeeper (quotas, the ensemble's config) or with '..'
            # segments or odd characters would point every write somewhere else.
            from airflow_epochs.coordination.base.names import validate_root

            try:
                validate_root(chroot)
            except ValueError as exc:
                raise InvalidConnection(f"invalid chroot {chroot[:80]!r}: {exc}") from None
        default_port = int(port) if port else DEFAULT_PORT
        hosts = [_host_entry(item.strip(), default_port, host) for item in text.split(",")]
        if bool(login) != bool(password):
            raise InvalidConnection("digest authentication needs both a login and a password")
        values = _normalise_extras(extra or {})
        # Secure by default: credentials protect what this client creates unless use_acl says otherwise.
        values.setdefault("use_acl", bool(login))
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
            # Tries again at most a second apart (kazoo's own backoff grows to an hour): a server that closes
            # our connection at once while another user's flood holds its handshake slots lets one through as
            # slots turn over, and a try that waits 25 s after the last one misses them.
            "connection_retry": {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": CONNECT_RETRY_MAX_DELAY},
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

    def client(self, client_class: type[KazooClient] = KazooClient) -> KazooClient:
        """A new (not yet started) kazoo client for these settings, logging through a logger that
        redacts credentials (kazoo logs its Auth request, password included, at DEBUG level) and folds
        its reconnect tries into one line of each outage's start and end
        (``airflow_epochs.connection.kazoo_log``).

        :param client_class: kazoo's client or an extension of it (the triggers' re-arming client).
        """
        register_secret(self.password, self.keyfile_password)
        return client_class(logger=ReconnectFolding(redacting_logger()), **self.kazoo_kwargs())

    def start_client(self, timeout: float | None = None, client_class: type[KazooClient] = KazooClient) -> KazooClient:
        """A started client, or a clear error: :class:`TlsHandshakeFailed` as soon as every server refused
        the TLS handshake (kazoo itself would retry until the timeout and say only "time-out"), else
        :class:`ZooKeeperUnreachable` after ``timeout`` (the connection timeout by default).

        :param client_class: kazoo's client or an extension of it.
        """
        timeout = self.connection_timeout if timeout is None else timeout
        if self.use_tls:
            self.check_tls(timeout=min(timeout, 5.0))
        client = self.client(client_class)
        try:
            client.start(timeout=timeout)
        except KazooTimeoutError:  # kazoo has stopped and closed the client
            floods = [flood.describe() for flood in self._floods()]
            raise ZooKeeperUnreachable(
                f"no ZooKeeper server answered at {self.describe()} within {timeout:g} s"
                + (f" ({'; '.join(floods)}: a flood of sockets keeps new connections out while it lasts)"
                   if floods else "")) from None
        return client

    def _floods(self) -> list[Flood]:
        """Other local users' floods of connections to the loopback ones of our hosts (see
        :mod:`airflow_epochs.connection.socket_census`)."""
        found = []
        for entry in self.hosts:
            name, port = split_host(entry)
            if _is_loopback(name):
                flood = flood_on(port)
                if flood is not None:
                    found.append(flood)
        return found

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context these settings describe (the one kazoo builds, for probes)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = self.check_hostname and self.verify_certs
        context.verify_mode = ssl.CERT_REQUIRED if self.verify_certs else ssl.CERT_NONE
        try:
            if self.ca:
                context.load_verify_locations(self.ca)
            if self.certfile and self.keyfile:
                context.load_cert_chain(self.certfile, self.keyfile, password=self.keyfile_password)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidConnection(f"TLS files of the connection cannot be loaded: {exc}") from None
        return context

    def check_tls(self, timeout: float = 5.0) -> None:
        """Shake hands with each server; raise :class:`TlsHandshakeFailed` if every reachable server's
        handshake failed (a server that cannot be reached at all is left to the client's retries)."""
        context = self.ssl_context()
        failures: list[str] = []
        closed: list[str] = []
        for entry in self.hosts:
            name, port = split_host(entry)
            try:
                with socket.create_connection((name, port), timeout=timeout) as sock, \
                        context.wrap_socket(sock, server_hostname=name):
                    return
            except ssl.SSLCertVerificationError as exc:
                failures.append(f"{entry}: certificate refused: {exc.verify_message}")
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError) as exc:
                if _is_loopback(name) and flood_on(port) is not None:
                    continue  # closed by a server busy with another user's flood: left to the client's retries
                if closes_new_connections(name, port, timeout=timeout):
                    closed.append(entry)
                else:
                    failures.append(f"{entry}: {_reason(exc)} (does the server serve TLS on this port?)")
            except ssl.SSLError as exc:
                failures.append(f"{entry}: {_reason(exc)} (does the server serve TLS on this port?)")
            except OSError:
                continue
        if closed and not failures:
            raise ConnectionsRefused(
                f"{', '.join(closed)} closed the connection before the TLS handshake, as ZooKeeper does to every "
                "new connection from an address at its per-address connection limit (maxClientCnxns): most "
                "likely other connections from this address use them all up (another local user's idle "
                "sockets, or clients that are never closed); raise or lift the server's maxClientCnxns, or "
                "find who holds the connections (ss -tn)")
        failures += [f"{entry}: closed the connection before the TLS handshake (per-address connection limit "
                     "maxClientCnxns reached?)" for entry in closed]
        if failures:
            raise TlsHandshakeFailed(
                "TLS handshake refused (" + "; ".join(failures) + "): check the connection's ca, and that the "
                "host names are in the server certificate (check_hostname is on)")

    def server_version(self, timeout: float = 3.0) -> str | None:
        """The version a server reports through the ``srvr`` four-letter word (over TLS when the connection
        uses it), or None if no server answers it (the word may be disabled)."""
        context = self.ssl_context() if self.use_tls else None
        for entry in self.hosts:
            name, port = split_host(entry)
            try:
                with socket.create_connection((name, port), timeout=timeout) as raw:
                    sock = context.wrap_socket(raw, server_hostname=name) if context else raw
                    sock.sendall(b"srvr")
                    answer = sock.recv(4096).decode(errors="replace")
            except OSError:
                continue
            for line in answer.splitlines():
                if line.startswith("Zookeeper version:"):
                    return line.split(":", 1)[1].split("-", 1)[0].split(",", 1)[0].strip()
        return None

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


def _host_entry(item: str, default_port: int, text: str) -> str:
    """``host:port``, ``[v6]:port``, ``host``, ``v6`` or ``[v6]`` -> ``host:port`` / ``[v6]:port``."""
    if not item:
        raise InvalidConnection(f"empty entry in hosts {text!r}")
    bad = InvalidConnection(f"invalid host entry {item!r} in {text!r} (expected host:port, or [IPv6]:port)")
    if item.startswith("["):
        address, _, rest = item[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise bad
        name, port_text = f"[{address}]", rest[1:] if rest else str(default_port)
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise bad from None
    elif item.count(":") > 1:  # a bare IPv6 address: no port can follow it unambiguously
        try:
            name, port_text = f"[{ipaddress.IPv6Address(item)}]", str(default_port)
        except ValueError:
            raise bad from None
    else:
        name, sep, port_text = item.rpartition(":")
        if not sep:
            name, port_text = item, str(default_port)
        if not name or any(ch.isspace() or not ch.isprintable() or ch in "@/[]" for ch in name):
            raise bad
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise bad
    return f"{name}:{int(port_text)}"


def _is_loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return name == "localhost"


def split_host(entry: str) -> tuple[str, int]:
    """A validated ``host:port`` / ``[v6]:port`` entry -> (host, port) for a socket."""
    name, _, port = entry.rpartition(":")
    return name.strip("[]"), int(port)


def redacting_logger() -> logging.Logger:
    """The logger kazoo clients of this package log through, with credentials redacted (kazoo logs its
    Auth request, password included, at DEBUG level)."""
    logger = logging.getLogger("airflow_epochs.kazoo")
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
    return logger
