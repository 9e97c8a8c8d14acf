"""``start``, ``status`` and ``stop`` of a server the CLI manages, one code path for every server: what
differs (how to start it, find it, probe it, describe it) is a :class:`ManagedServer`'s functions."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import CliError, state_dir, stop_recorded
from airflow_epochs.private_files import StateLocked, exclusive_lock, private_dir

ACTIONS = ("start", "stop", "status")
# How long a start or stop waits for another one on the same state folder (a JVM start can take minutes
# on a loaded machine) before giving up with one line.
LOCK_WAIT = 300.0


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
    :param before_stop: what to stop first (the server's watchdog).
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
    before_stop: Callable[[Path], object] | None = None

    def stop(self, base: Path) -> bool:
        if self.before_stop is not None:  # what restarts the server goes first
            self.before_stop(base)
        return stop_recorded(base, self.name, group=self.stop_group, keep=self.keep_on_stop)

    def lock_file(self, base: Path) -> Path:
        return base / f"{self.name}.lock"

    @contextlib.contextmanager
    def exclusive(self, base: Path, action: str, *, timeout: float = LOCK_WAIT) -> Iterator[None]:
        """Hold this server's lock in the state folder for a whole start or stop: two starts at once
        would otherwise both find nothing running and start two servers on one data folder. The second
        waits for the first (then finds its server running) or gives up after ``timeout`` (a CliError)."""
        try:
            with exclusive_lock(self.lock_file(private_dir(base)), timeout=timeout,
                                holder=f"a {self.label} {action}"):
                yield
        except StateLocked as exc:
            raise CliError(str(exc)) from None


def run_server_command(server: ManagedServer, args: argparse.Namespace) -> int:
    """``airflow-epochs NAME start|status|stop``: 0 on success, 1 when ``status`` finds it down or
    unhealthy, 2 when it cannot start."""
    base = state_dir(args.state_dir)
    if args.action == "start":
        try:
            with server.exclusive(base, "start"):
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
    if not os.path.lexists(base):  # nothing was ever started here: no folder to create for the lock
        stopped = False
    else:
        with server.exclusive(base, "stop"):
            stopped = server.stop(base)
    print(f"{server.label} stopped" if stopped else f"{server.label} was not running")
    return 0


def verb(state: dict[str, Any]) -> str:
    return "already running" if state.get("already_running") else "started"
