"""``airflow-epochs spark-connect start|status|stop``: a warm Spark Connect server that requires a token."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from airflow_epochs.cli.servers import ManagedServer, verb
from airflow_epochs.cli.state import CliError, alive, previous_port, read_state, state_file
from airflow_epochs.private_files import private_dir, read_private, write_private

NAME = "spark-connect"


def running_connect_server(base: Path) -> dict[str, Any] | None:
    """The CLI-managed Spark Connect server's state if its process is alive and its port answers."""
    from airflow_epochs.servers.embedded_spark_connect import listening
    from airflow_epochs.spark.loopback import UntrustedListener, check_listener

    state = read_state(base, NAME)
    if not state or not alive(state) or not listening(int(state["port"])):
        return None
    try:  # the port answers: it must be our server's own socket, not one another user took
        check_listener("127.0.0.1", int(state["port"]), server_group=int(state["pid"]))
    except UntrustedListener as exc:
        raise CliError(f"Spark Connect: {exc}") from None
    return state


def start_connect_server(base: Path, port: int | None = None, master: str = "local[2]",
                         token: str | None = None) -> dict[str, Any]:
    """Start (or find) the detached Spark Connect server; returns its state (never the token: it stays
    in the 0600 file the state names).

    :param token: the token clients must send; by default the server's previous one, else a new one.
    """
    from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer

    current = running_connect_server(base)
    if current:
        return {**current, "already_running": True}
    server = SparkConnectServer(private_dir(base) / NAME, port=port or previous_port(base, NAME),
                                master=master, token=token).start()
    identity = server.identity()
    state = {"pid": server.pid, "port": server.port, "url": server.display_url, "master": master,
             "log": str(server.log_file), "token_file": str(server.token_file),
             "identity": identity.to_json() if identity else None}
    write_private(state_file(base, NAME), json.dumps(state))
    return {**state, "already_running": False}


def connect_server_health(base: Path, state: dict[str, Any], *, timeout: float = 60.0) -> tuple[bool, str]:
    """A real query to the CLI-managed Spark Connect server, with the token from its 0600 file."""
    from airflow_epochs.servers.embedded_spark_connect import TOKEN_FILE, probe

    token = read_private(base / NAME / TOKEN_FILE, secret=True).strip()
    healthy, why = probe(f"sc://localhost:{state['port']}/;token={token}", timeout=timeout,
                         server_group=int(state["pid"]), cwd=base / NAME)
    # the client's error line may repeat the connection string: the token never reaches the terminal
    return healthy, why.replace(token, "***") if token else why


def connect_token(conn_id: str) -> str:
    """The token (password) of an Airflow ``spark_connect`` connection, for the server to require."""
    from airflow_epochs.hooks.connections import connection_outside_task

    conn = connection_outside_task(conn_id)  # the metadata database too, not only AIRFLOW_CONN_*
    if not conn.password:
        raise CliError(f"connection {conn_id!r} has no password: the Spark Connect token goes there")
    return str(conn.password)


def stop_connect_server(base: Path) -> bool:
    return SPARK_CONNECT.stop(base)


def _start(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    token = connect_token(args.conn_id) if args.conn_id else None
    try:
        return start_connect_server(base, args.port, args.master, token=token)
    except ValueError as exc:  # a malformed token from the connection (never shown)
        raise CliError(f"connection {args.conn_id!r}: {exc}") from None


def _probe(base: Path, args: argparse.Namespace, running: dict[str, Any]) -> tuple[bool, str]:
    healthy, why = connect_server_health(base, running, timeout=args.probe_timeout)
    if not healthy:  # the pid lives and the port listens, yet a query fails: say so
        return False, f"Spark Connect UNHEALTHY at {running['url']} (pid {running['pid']}): {why}"
    return True, (f"Spark Connect running at {running['url']} (pid {running['pid']}, master {running['master']}; "
                  "answered a query)")


def _started(state: dict[str, Any]) -> list[str]:
    return [f"Spark Connect {verb(state)} at {state['url']} (pid {state['pid']}, master {state['master']}, "
            f"log {state['log']})",
            f"clients authenticate with the token in {state.get('token_file')} (an Airflow spark_connect "
            "connection: host localhost, that port, the token as its password)"]


def _start_errors() -> tuple[type[Exception], ...]:
    from airflow_epochs.servers.embedded_spark_connect import SparkConnectStartError

    return (SparkConnectStartError,)


# The server leads its own process group (spark-submit and what it starts): stopped as a group.
SPARK_CONNECT = ManagedServer(name=NAME, label="Spark Connect", start=_start, find=running_connect_server,
                              probe=_probe, started=_started, start_errors=_start_errors, stop_group=True)
