"""Where a pipeline command finds ZooKeeper when it is given neither ``--conn-id`` nor ``--hosts``.

In this order:

1. the embedded server of the state folder (``--state-dir``, ``$AIRFLOW_EPOCHS_HOME``, else
   ``~/.airflow-epochs``) when it is running;
2. when the state folder was named (``--state-dir`` or ``$AIRFLOW_EPOCHS_HOME``) and holds a stopped
   embedded server (its data and credentials, as ``airflow-epochs zookeeper stop`` or the demo's end
   leave them): that server, started for the command and stopped after it;
3. the Airflow connection ``zookeeper_default`` (from the secrets backends, ``AIRFLOW_CONN_*`` or the
   metadata database), looked up only where Airflow is set up (``AIRFLOW_CONN_ZOOKEEPER_DEFAULT``,
   ``$AIRFLOW_HOME`` or ``~/airflow/airflow.cfg``): importing Airflow elsewhere would create an
   ``~/airflow`` as a side effect;
4. a stopped embedded server of the default state folder, as in 2.

Otherwise one line says each place it looked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import CliError, read_state, state_dir
from airflow_epochs.connection.credentials import CREDENTIALS_FILE
from airflow_epochs.connection.embedded import NAME, STATE_ENV, client_settings, running_server

__all__ = ["DEFAULT_CONN_ID", "found_settings", "stopped_server"]

DEFAULT_CONN_ID = "zookeeper_default"


def _airflow_set_up() -> bool:
    if os.environ.get(f"AIRFLOW_CONN_{DEFAULT_CONN_ID.upper()}") or os.environ.get("AIRFLOW_HOME"):
        return True
    return (Path.home() / "airflow" / "airflow.cfg").is_file()


def stopped_server(base: Path) -> dict[str, Any] | None:
    """The recorded state of an embedded server that ran in ``base`` and is not running now (its port
    kept, its data and credentials in ``base/zookeeper``), or None."""
    state = read_state(base)
    if not state or "port" not in state or not (base / NAME / CREDENTIALS_FILE).is_file():
        return None
    return None if running_server(base) else state


def _connection(conn_id: str) -> Any | None:
    """The settings of Airflow connection ``conn_id``, or None when it is not defined."""
    from airflow_epochs.connection.zookeeper import InvalidConnection
    from airflow_epochs.coordination import InvalidInput
    from airflow_epochs.hooks.connections import connection_outside_task
    from airflow_epochs.hooks.zookeeper import settings_of

    try:
        conn = connection_outside_task(conn_id)
    except InvalidInput:
        return None
    try:
        return settings_of(conn)
    except InvalidConnection as exc:
        raise CliError(f"connection {conn_id!r}: {exc}") from None


def _embedded(base: Path, state: dict[str, Any], connection_timeout: float) -> Any:
    from airflow_epochs.connection.zookeeper import InvalidConnection

    try:
        return client_settings(base, state, connection_timeout=connection_timeout)
    except InvalidConnection as exc:
        raise CliError(f"the embedded server's state in {base}: {exc}") from None


@contextlib.contextmanager
def serving_stopped(base: Path, state: dict[str, Any], *, connection_timeout: float) -> Iterator[Any]:
    """The stopped embedded server of ``base``, started (on its recorded port, data and credentials) for
    the command and stopped after it. It holds the state folder's ZooKeeper lock throughout, so a
    ``zookeeper start`` or another command waits instead of starting a second server on the same data."""
    from airflow_epochs.cli.zookeeper import ZOOKEEPER
    from airflow_epochs.servers.embedded_zookeeper import ZooKeeperError
    from airflow_epochs.servers.secured_zookeeper import secured_server

    with ZOOKEEPER.exclusive(base, "serve for a command"):
        running = running_server(base)  # started by someone else while we waited for the lock
        if running is not None:
            yield _embedded(base, running, connection_timeout)
            return
        plaintext = state.get("secure_port") is None
        server = secured_server(base / NAME, port=state["port"], secure_port=state.get("secure_port"),
                                plaintext=plaintext, die_with_parent=True)
        started = time.monotonic()
        try:
            server.start()
        except ZooKeeperError as exc:
            server.stop()
            raise CliError(f"the embedded ZooKeeper of {base} is stopped and did not start for this command: "
                           f"{exc}") from None
        except BaseException:
            server.stop()
            raise
        print(f"(the embedded ZooKeeper of {base} was stopped: served for this command, started in "
              f"{time.monotonic() - started:.1f} s; 'airflow-epochs zookeeper start' keeps it running)",
              file=sys.stderr)
        try:
            yield dataclasses.replace(server.client_settings(), connection_timeout=connection_timeout)
        finally:
            server.stop()


@contextlib.contextmanager
def found_settings(explicit_state_dir: str | None, *, connection_timeout: float) -> Iterator[tuple[Any, str]]:
    """The settings of the deployment a command given no ``--conn-id`` or ``--hosts`` works on (see the
    module's docstring for the order), and where they came from, in words."""
    base = state_dir(explicit_state_dir)
    named = bool(explicit_state_dir or os.environ.get(STATE_ENV))
    embedded = f"the embedded ZooKeeper of {base}"
    running = running_server(base)
    if running is not None:
        yield _embedded(base, running, connection_timeout), embedded
        return
    stopped = stopped_server(base)
    if stopped is not None and named:
        with serving_stopped(base, stopped, connection_timeout=connection_timeout) as settings:
            yield settings, embedded
        return
    looked = [f"no embedded ZooKeeper in {base}" + ("" if named else f" (${STATE_ENV} is not set)")]
    if _airflow_set_up():
        settings = _connection(DEFAULT_CONN_ID)
        if settings is not None:
            yield settings, f"the Airflow connection {DEFAULT_CONN_ID!r}"
            return
        looked.append(f"no Airflow connection {DEFAULT_CONN_ID!r}")
    else:
        looked.append(f"no Airflow set up here to hold a connection {DEFAULT_CONN_ID!r} (no $AIRFLOW_HOME, "
                      "~/airflow/airflow.cfg or $AIRFLOW_CONN_ZOOKEEPER_DEFAULT)")
    if stopped is not None:
        with serving_stopped(base, stopped, connection_timeout=connection_timeout) as settings:
            yield settings, embedded
        return
    raise CliError(f"where is ZooKeeper? {'; '.join(looked)}. Give --conn-id (an Airflow connection), --hosts, "
                   f"or ${STATE_ENV} (the folder of an embedded server)")
