"""The CLI's state folder: where each server it manages records its port, pid and identity (read by
:mod:`airflow_epochs.connection.embedded`, written and acted on here).

A folder or file another user owns or may write is refused, never adopted; a recorded pid is signalled
only while it is still the server we started (its identity carries our nonce).
"""

from __future__ import annotations

import json
from pathlib import Path

from airflow_epochs.connection.embedded import (  # the reading half, shared with the hook
    STATE_ENV,
    alive,
    read_state,
    recorded_identity,
    state_dir,
    state_file,
)
from airflow_epochs.private_files import write_private
from airflow_epochs.process_identity import NotOurProcess, stop_verified

__all__ = ["STATE_ENV", "CliError", "alive", "previous_port", "read_state", "state_dir", "state_file",
           "stop_recorded"]


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def previous_port(base: Path, server: str = "zookeeper") -> int | None:
    """The port ``server`` last had: a restart takes it again, so connections written for it keep working."""
    state = read_state(base, server)
    return int(state["port"]) if state and "port" in state else None


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
