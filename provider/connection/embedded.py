"""The embedded ZooKeeper that ``airflow-epochs zookeeper start`` runs, as its clients see it: the state
folder it records itself in, whether it still serves, and the settings that reach it.

Below both the command line (which starts and stops the server) and the hook and triggers (which
only read what it recorded), so a client given ``127.0.0.1:PORT`` finds the server's credentials
without importing the command line or a server. Everything read here is a private file of ours
(:mod:`airflow_epochs.private_files`): a folder or file another user owns or may write is refused,
never adopted.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from airflow_epochs.connection.credentials import CREDENTIALS_FILE, ServerAuth, read_auth
from airflow_epochs.connection.probe import four_letter_word
from airflow_epochs.connection.zookeeper import ZooKeeperSettings, split_host
from airflow_epochs.private_files import UnsafeState, check_private_dir, read_private
from airflow_epochs.process_identity import ProcessIdentity

__all__ = [
    "LOOPBACK",
    "NAME",
    "STATE_ENV",
    "CorruptState",
    "alive",
    "client_settings",
    "credentials_file",
    "decode_state",
    "read_state",
    "recorded_auth",
    "recorded_identity",
    "running_server",
    "state_dir",
    "state_file",
    "state_port",
    "tls_files",
    "with_embedded_credentials",
]

STATE_ENV = "AIRFLOW_EPOCHS_HOME"
NAME = "zookeeper"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class CorruptState(ValueError):
    """A state or credentials file of ours that does not hold what we wrote there (one line, naming it)."""


def state_dir(explicit: str | None) -> Path:
    """Where the CLI keeps the embedded servers' data and state: ``--state-dir``, ``$AIRFLOW_EPOCHS_HOME``
    or ``~/.airflow-epochs``. Not resolved: a link in its place is refused, never followed."""
    return Path(explicit or os.environ.get(STATE_ENV) or Path.home() / ".airflow-epochs").expanduser().absolute()


def state_file(base: Path, server: str = NAME) -> Path:
    return base / f"{server}.json"


def read_state(base: Path, server: str = NAME) -> dict[str, Any] | None:
    """What the CLI recorded when it started ``server`` (``zookeeper`` or ``spark-connect``); None if
    nothing is. A folder or file another user owns or may write is refused (:class:`UnsafeState`), and
    so is a file that is not a state (:class:`CorruptState`; one line each, naming the file)."""
    path = state_file(base, server)
    if not os.path.lexists(base):
        return None
    check_private_dir(base)
    try:
        text = read_private(path)
    except FileNotFoundError:
        return None
    try:
        data = decode_state(text)
    except ValueError as exc:
        raise CorruptState(f"{path} is corrupt ({exc}): remove it (and stop the server yourself if one runs)") \
            from None
    return data


def decode_state(text: str) -> dict[str, Any]:
    """A state file's object, its port (if any) checked to be a TCP port; :class:`ValueError` otherwise."""
    from airflow_epochs.coordination.wire.payloads import loads_bounded

    data = loads_bounded(text)
    if not isinstance(data, dict):
        raise ValueError(f"not an object but {type(data).__name__}")
    for key in ("port", "secure_port"):
        if data.get(key) is not None:
            data[key] = state_port(data[key])
    return data


def state_port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"port {str(value)[:40]!r} is not a TCP port")
    return value


def recorded_identity(state: dict[str, Any]) -> ProcessIdentity | None:
    try:
        return ProcessIdentity.from_json(state["identity"]) if state.get("identity") else None
    except ValueError:
        return None


def alive(state: dict[str, Any]) -> bool:
    """Whether the recorded server still runs: the same process (pid, start time, command line)."""
    identity = recorded_identity(state)
    return identity is not None and identity.alive()


def tls_files(state: dict[str, Any]) -> dict[str, str]:
    """The CA (and our client certificate and key, which the server requires) the state records."""
    return {key: str(state[key]) for key in ("ca", "certfile", "keyfile") if state.get(key)}


def running_server(base: Path) -> dict[str, Any] | None:
    """The state of the CLI-managed server if it is running and serving, else None."""
    state = read_state(base)
    if not state or not alive(state):
        return None
    # A TLS server has no plaintext port (its port is its TLS port); one an earlier version started has.
    tls_only = state.get("ca") and state.get("port") == state.get("secure_port")
    answer = four_letter_word(int(state["port"]), timeout=2.0, **(tls_files(state) if tls_only else {}))
    if "Mode:" not in answer:
        return None
    state["mode"] = next(line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:"))
    return state


def credentials_file(base: Path) -> Path:
    """Where the embedded server's digest credentials are: a 0600 file in its folder (as in the demo's)."""
    return base / NAME / CREDENTIALS_FILE


def recorded_auth(base: Path, state: dict[str, Any] | None = None) -> ServerAuth | None:
    """The embedded server's credentials (None if it has none yet); :class:`CorruptState` if they are
    corrupt. A server an earlier version started (still running, its credentials still in ``state``)
    keeps working: its files move at its next start."""
    try:
        auth = read_auth(credentials_file(base))
        if auth is None and state and "credentials" in state:
            auth = ServerAuth.from_json(state["credentials"])
    except ValueError as exc:
        raise CorruptState(f"{exc} ({state_file(base)})") from None
    return auth


def client_settings(base: Path, state: dict[str, Any], *, connection_timeout: float = 15.0) -> ZooKeeperSettings:
    """How a command connects to the running embedded server: its recorded hosts (the TLS port unless it
    serves plaintext), credentials and CA."""
    auth = recorded_auth(base, state)
    extra: dict[str, Any] = {"connection_timeout": connection_timeout}
    if state.get("ca"):
        extra.update(use_tls=True, **tls_files(state))
    return ZooKeeperSettings.from_fields(host=str(state["hosts"]), login=auth.user if auth else None,
                                         password=auth.password if auth else None, extra=extra)


def with_embedded_credentials(settings: ZooKeeperSettings, base: Path | None = None) -> ZooKeeperSettings:
    """``settings`` as they are, unless they carry no credentials and name exactly the running embedded
    server of the state folder (either of its ports, on loopback): then that server's credentials,
    over TLS to its TLS port checked against its CA (unless it serves plaintext), keeping the
    connection's chroot, session timeout and read-only choice. How a hook or a command given only
    ``127.0.0.1:PORT`` talks to the server ``airflow-epochs zookeeper start`` runs.

    :param base: the state folder (default: ``$AIRFLOW_EPOCHS_HOME``, else ``~/.airflow-epochs``).
    """
    if settings.login or len(settings.hosts) != 1:
        return settings
    name, port = split_host(settings.hosts[0])
    if name not in LOOPBACK:
        return settings
    base = base or state_dir(None)
    try:
        recorded = read_state(base)
        if not recorded or port not in (recorded.get("port"), recorded.get("secure_port")):
            return settings
        state = running_server(base)
    except (CorruptState, UnsafeState):  # not a state we may trust: the connection stays as it was written
        return settings
    if state is None:
        return settings
    embedded = client_settings(base, state, connection_timeout=settings.connection_timeout)
    return dataclasses.replace(embedded, chroot=settings.chroot, session_timeout=settings.session_timeout,
                               read_only=settings.read_only)
