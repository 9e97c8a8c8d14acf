"""``start``, ``status`` and ``stop`` of a server the CLI manages, one code path for every server: what
differs (how to start it, find it, probe it, describe it) is a :class:`ManagedServer`'s functions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import state_dir, stop_recorded

ACTIONS = ("start", "stop", "status")


@dataclass(frozen=True)
class ManagedServer:
    """A server kind the CLI starts detached and records in its state folder.

    :param name: the subcommand and the state file's name (``zookeeper`` -> ``zookeeper.json``).
    :param label: how messages name it.
    :param start: start it (or find it running); returns its state with ``already_running``.
    :param find: the running server's state, or None when it is not running.
    :param probe: ``(healthy, line)`` of a running server: a real request, not the pid.
    :param started: the lines printed after ``start`` (its address, pid, where clients find credentials).
    :param start_errors: the errors of a failed start (printed as they are: they carry the log tail).
    :param stop_group: signal its whole process group (it leads one) rather than its pid.
    :param keep_on_stop: state kept across a stop (its port: the next start serves where clients point).
    """

    name: str
    label: str
    start: Callable[[Path, argparse.Namespace], dict[str, Any]]
    find: Callable[[Path], dict[str, Any] | None]
    probe: Callable[[Path, argparse.Namespace, dict[str, Any]], tuple[bool, str]]
    started: Callable[[dict[str, Any]], list[str]]
    start_errors: Callable[[], tuple[type[Exception], ...]]
    stop_group: bool = False
    keep_on_stop: tuple[str, ...] = ("port",)

    def stop(self, base: Path) -> bool:
        return stop_recorded(base, self.name, group=self.stop_group, keep=self.keep_on_stop)


def run_server_command(server: ManagedServer, args: argparse.Namespace) -> int:
    """``airflow-epochs NAME start|status|stop``: 0 on success, 1 when ``status`` finds it down or
    unhealthy, 2 when it cannot start."""
    base = state_dir(args.state_dir)
    if args.action == "start":
        try:
            state = server.start(base, args)
        except server.start_errors() as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for line in server.started(state):
            print(line)
        return 0
    if args.action == "status":
        running = server.find(base)
        if running is None:
            print(f"{server.label} is not running")
            return 1
        healthy, line = server.probe(base, args, running)
        print(line)
        return 0 if healthy else 1
    print(f"{server.label} stopped" if server.stop(base) else f"{server.label} was not running")
    return 0


def verb(state: dict[str, Any]) -> str:
    return "already running" if state.get("already_running") else "started"
