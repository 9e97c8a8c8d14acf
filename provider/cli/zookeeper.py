"""``airflow-epochs zookeeper start|status|stop``: the detached embedded ZooKeeper, data in the state folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from airflow_epochs.cli.servers import ManagedServer, verb
from airflow_epochs.cli.state import alive, previous_port, read_state, state_file
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, ZooKeeperError, four_letter_word
from airflow_epochs.servers.private_files import private_dir, write_private

NAME = "zookeeper"


def running_server(base: Path) -> dict[str, Any] | None:
    """The state of the CLI-managed server if it is running and serving, else None."""
    state = read_state(base)
    if not state or not alive(state):
        return None
    answer = four_letter_word(int(state["port"]))
    if "Mode:" not in answer:
        return None
    state["mode"] = next(line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:"))
    return state


def start_server(base: Path, port: int | None = None) -> dict[str, Any]:
    """Start (or find) the detached embedded server; returns its state."""
    current = running_server(base)
    if current:
        return {**current, "already_running": True}
    server = EmbeddedZooKeeper(directory=private_dir(base) / NAME, port=port or previous_port(base))
    server.start()
    identity = server.identity(0)
    state = {"pid": server.pid, "port": server.port, "hosts": server.hosts, "directory": str(server.directory),
             "identity": identity.to_json() if identity else None}
    write_private(state_file(private_dir(base)), json.dumps(state))
    return {**state, "mode": "standalone", "already_running": False}


def stop_server(base: Path) -> bool:
    return ZOOKEEPER.stop(base)


def _start(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    return start_server(base, args.port)


def _probe(base: Path, args: argparse.Namespace, running: dict[str, Any]) -> tuple[bool, str]:
    return True, f"ZooKeeper running at {running['hosts']} (pid {running['pid']}, mode {running['mode']})"


def _started(state: dict[str, Any]) -> list[str]:
    return [f"ZooKeeper {verb(state)} at {state['hosts']} (pid {state['pid']}, data in {state['directory']})"]


def _start_errors() -> tuple[type[Exception], ...]:
    return (ZooKeeperError,)


ZOOKEEPER = ManagedServer(name=NAME, label="ZooKeeper", start=_start, find=running_server, probe=_probe,
                          started=_started, start_errors=_start_errors)
