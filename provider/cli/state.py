"""The CLI's state folder: where each server it manages records its port, pid and identity.

A folder or file another user owns or may write is refused, never adopted; a recorded pid is signalled
only while it is still the server we started (its identity carries our nonce).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow_epochs.servers.private_files import check_private_dir, read_private, write_private
from airflow_epochs.servers.process_identity import NotOurProcess, ProcessIdentity, stop_verified

STATE_ENV = "AIRFLOW_EPOCHS_HOME"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def state_dir(explicit: str | None) -> Path:
    """Where the CLI keeps the embedded servers' data and state: ``--state-dir``, ``$AIRFLOW_EPOCHS_HOME``
    or ``~/.airflow-epochs``. Not resolved: a link in its place is refused, never followed."""
    return Path(explicit or os.environ.get(STATE_ENV) or Path.home() / ".airflow-epochs").expanduser().absolute()


def state_file(base: Path, server: str = "zookeeper") -> Path:
    return base / f"{server}.json"


def read_state(base: Path, server: str = "zookeeper") -> dict[str, Any] | None:
    """What the CLI recorded when it started ``server`` (``zookeeper`` or ``spark-connect``); None if
    nothing is. A folder or file another user owns or may write is refused, and so is a file that is
    not a state (one line each, naming the file)."""
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
        raise CliError(f"{path} is corrupt ({exc}): remove it (and stop the server yourself if one runs)") from None
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


def previous_port(base: Path, server: str = "zookeeper") -> int | None:
    """The port ``server`` last had: a restart takes it again, so connections written for it keep working."""
    state = read_state(base, server)
    return int(state["port"]) if state and "port" in state else None


# -- process identity: a pid is signalled only while it is still the server we started -----------

def recorded_identity(state: dict[str, Any]) -> ProcessIdentity | None:
    try:
        return ProcessIdentity.from_json(state["identity"]) if state.get("identity") else None
    except ValueError:
        return None


def alive(state: dict[str, Any]) -> bool:
    """Whether the recorded server still runs: the same process (pid, start time, command line)."""
    identity = recorded_identity(state)
    return identity is not None and identity.alive()


def stop_recorded(base: Path, server: str, *, group: bool, keep: tuple[str, ...] = ("port",)) -> bool:
    """Stop the server recorded in ``base`` after checking it is the one we started. What ``keep`` names
    stays in the state file (the port: the next start takes it again); the rest goes once the server is
    gone. A pid that runs something else is never signalled (a CliError)."""
    state = read_state(base, server)
    if not state or ("pid" not in state and "identity" not in state):  # nothing recorded as running
        return False
    identity = recorded_identity(state)
    if identity is None:
        raise CliError(f"{state_file(base, server)} records pid {state.get('pid')!r} but no process identity "
                       "(start time and command line) to check it against: not signalling it. Stop the server "
                       "yourself if it is still running, then remove that file")
    try:
        stopped = stop_verified(identity, group=group)
    except NotOurProcess as exc:
        raise CliError(f"{exc}. The state file {state_file(base, server)} is stale: remove it") from None
    kept = {key: state[key] for key in keep if key in state}
    if kept:
        write_private(state_file(base, server), json.dumps(kept))
    else:
        state_file(base, server).unlink(missing_ok=True)
    return stopped
