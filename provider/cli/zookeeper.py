"""``airflow-epochs zookeeper start|status|stop``: the detached embedded ZooKeeper, data in the state folder.

Usable only by our clients: every session must authenticate with the digest credentials generated at
the first start (kept across stops in the 0600 file ``zookeeper/credentials.json``), ``/`` carries only
that identity's ACL, and clients connect over TLS, checking the server's certificate against the CA
kept in ``zookeeper/tls/`` (the demo's server keeps the same files), so the password never leaves this
process before the server has proven it is ours (a process squatting the port while the server is down
gets nothing). The server in turn requires the client certificate kept there (mutual TLS): no other
local user completes a handshake. ``--plaintext`` serves without TLS.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from airflow_epochs.cli.servers import ManagedServer, verb
from airflow_epochs.cli.state import CliError, read_state, state_file
from airflow_epochs.connection.credentials import CREDENTIALS_FILE, TLS_FOLDER, ServerAuth, read_auth
from airflow_epochs.connection.embedded import NAME, running_server
from airflow_epochs.private_files import check_private_dir, private_dir, write_private
from airflow_epochs.servers.embedded_zookeeper import ZooKeeperError
from airflow_epochs.servers.secured_zookeeper import secured_server
from airflow_epochs.servers.zookeeper_security import certificate_files

LEGACY_TLS_FOLDER = "zookeeper-tls"  # where versions before the shared layout kept the CA
# What a stop keeps: the next start serves where connections point (the credentials stay in their file).
KEPT_ON_STOP = ("port", "secure_port")


def start_server(base: Path, port: int | None = None, *, plaintext: bool = False) -> dict[str, Any]:
    """Start (or find) the detached embedded server, through the same
    :func:`~airflow_epochs.servers.secured_zookeeper.secured_server` as the demo (credentials and CA in
    the server's folder); returns its state, which names where the credentials are (never the password).

    :param plaintext: serve without TLS (clients then send the password in clear on loopback).
    """
    current = running_server(base)
    if current:
        return {**current, "already_running": True}
    previous = read_state(base) or {}
    folder = private_dir(base) / NAME
    migrate_legacy_files(base, previous)
    try:
        server = secured_server(folder, port=port or previous.get("port"),
                                secure_port=previous.get("secure_port"), plaintext=plaintext)
    except ValueError as exc:  # corrupt credentials: one line naming the file
        raise CliError(str(exc)) from None
    # The ports are recorded before the server starts: a start that fails still keeps them.
    kept = {"port": server.port, "secure_port": server.secure_port}
    write_private(state_file(base), json.dumps({k: v for k, v in kept.items() if v is not None}))
    try:
        server.start()
    except PermissionError as exc:  # the data belongs to credentials this state folder no longer has
        server.stop()
        raise CliError(f"{exc} ({server.directory})") from None
    except BaseException:  # never leave a detached server the state file does not name
        server.stop()
        raise
    state = record_running(base, server)
    return {**state, "mode": "standalone", "already_running": False}


def record_running(base: Path, server: Any) -> dict[str, Any]:
    """Record the started ``server`` (a :func:`secured_server` in ``base/zookeeper``) in the state folder
    ``base`` as this command's own start records it: the pipeline commands and ``zookeeper status|stop``
    then find it (the demo records its server this way too). Returns the state written."""
    identity = server.identity(0)
    state = {"port": server.port, "secure_port": server.secure_port, "pid": server.pid,
             "hosts": server.client_settings().connect_string, "ca": None,
             **(server.tls.client_files() if server.tls else {}),
             "directory": str(server.directory), "identity": identity.to_json() if identity else None}
    write_private(state_file(base), json.dumps(state))
    return state


def record_stopped(base: Path, server: Any) -> None:
    """What a stop keeps of ``server``'s record (its ports): a later start, or a command that serves the
    stopped server for itself, takes them again."""
    kept = {"port": server.port, "secure_port": server.secure_port}
    write_private(state_file(base), json.dumps({k: v for k, v in kept.items() if v is not None}))


def migrate_legacy_files(base: Path, state: dict[str, Any]) -> None:
    """Move what earlier versions of the CLI kept elsewhere to the files :func:`secured_server` uses, once:
    the credentials from the state file to ``zookeeper/credentials.json``, the CA and keys from
    ``zookeeper-tls/`` to ``zookeeper/tls/``. The server's data was locked with those credentials and
    clients trust that CA: new ones would lock us out of our own data."""
    folder = private_dir(base) / NAME
    if "credentials" in state:
        try:
            legacy = ServerAuth.from_json(state["credentials"])
        except ValueError as exc:
            raise CliError(f"{state_file(base)} is corrupt ({exc}): remove it, and the server's data with it") \
                from None
        if read_auth(folder / CREDENTIALS_FILE) is None:
            write_private(folder / CREDENTIALS_FILE, json.dumps(legacy.to_json()))
        write_private(state_file(base), json.dumps({k: v for k, v in state.items() if k != "credentials"}))
    legacy_tls = base / LEGACY_TLS_FOLDER
    if os.path.lexists(legacy_tls) and not os.path.lexists(folder / TLS_FOLDER):
        check_private_dir(legacy_tls)  # ours, not a link: never adopt keys someone else planted
        os.rename(legacy_tls, folder / TLS_FOLDER)


def stop_server(base: Path) -> bool:
    return ZOOKEEPER.stop(base)


def _start(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    from airflow_epochs.cli.zookeeper_watchdog import start_watchdog

    state = start_server(base, args.port, plaintext=args.plaintext)
    watchdog = start_watchdog(base, unresponsive_after=args.unresponsive_after)
    return {**state, "watchdog": watchdog.get("pid"), "unresponsive_after": watchdog.get("unresponsive_after")}


def _stop_watchdog(base: Path) -> None:
    from airflow_epochs.cli.zookeeper_watchdog import stop_watchdog

    stop_watchdog(base)


def _probe(base: Path, args: argparse.Namespace, running: dict[str, Any]) -> tuple[bool, str]:
    return True, f"ZooKeeper running at {running['hosts']} (pid {running['pid']}, mode {running['mode']})"


def _started(state: dict[str, Any]) -> list[str]:
    security = f"TLS (CA {state['ca']})" if state.get("ca") else "PLAINTEXT"
    return [f"ZooKeeper {verb(state)} at {state['hosts']} (pid {state['pid']}, data in {state['directory']})",
            *([f"watchdog pid {state['watchdog']}: restarts it if it exits or does not answer for "
               f"{state['unresponsive_after']:g} s"] if state.get("watchdog") else []),
            f"clients authenticate as digest user {_user(state)!r} over {security}; the password is in the 0600 "
            f"file {Path(state['directory']) / CREDENTIALS_FILE}"]


def print_values(base: Path) -> int:
    """``airflow-epochs zookeeper values``: what a connection to the embedded server holds, one
    ``NAME=value`` a line, named as the quickstart's ensemble block names them: its hosts, digest user, CA
    and our client certificate and key, and the 0600 file the password is in (never the password: a
    terminal's output is logged and shared more often than a file). 1 when no server ever started here."""
    state = read_state(base) or {}
    folder = base / NAME
    auth = read_auth(folder / CREDENTIALS_FILE)
    if auth is None or not state.get("port"):
        print(f"no embedded ZooKeeper has started in {base} ('airflow-epochs zookeeper start' makes one)")
        return 1
    running = running_server(base)
    hosts = (running or {}).get("hosts") or f"127.0.0.1:{state['port']}"
    tls = certificate_files(folder / TLS_FOLDER)
    values = {"ZK_HOSTS": hosts, "ZK_USER": auth.user, "ZK_PASSWORD_FILE": str(folder / CREDENTIALS_FILE)}
    if state.get("secure_port") is not None:
        values.update(ZK_CA=str(tls.ca), ZK_CERT=str(tls.client_cert), ZK_KEY=str(tls.client_key))
    for name, value in values.items():
        print(f"{name}={value}")
    print(f"# the password is the 'password' of ZK_PASSWORD_FILE; the server is "
          f"{'running' if running else 'stopped'}")
    return 0


def _user(state: dict[str, Any]) -> str:
    auth = read_auth(Path(state["directory"]) / CREDENTIALS_FILE)
    return auth.user if auth else "?"


def _start_errors() -> tuple[type[Exception], ...]:
    return (ZooKeeperError,)


ZOOKEEPER = ManagedServer(name=NAME, label="ZooKeeper", start=_start, find=running_server, probe=_probe,
                          started=_started, start_errors=_start_errors, keep_on_stop=KEPT_ON_STOP,
                          before_stop=_stop_watchdog)
