"""Servers started for a run (ZooKeeper, Spark Connect), recorded so that they never outlive it unseen.

A run that starts a server writes a record beside its state: the server's identity and the run's own
(see :mod:`airflow_epochs.process_identity`). Servers started with ``die_with_parent`` stop when the
run's process exits, even by ``kill -9``. The next run reads the records first (:func:`reap_leftover`):

- nothing recorded, or the recorded server has exited: nothing to do;
- the server is ours and the run that started it is gone: it is stopped (an orphan of a killed run);
- the server is ours and its run is still alive: another run uses this state, :class:`RunStillActive`;
- the pid now belongs to another program: the stale record is dropped, nothing is signalled.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_epochs.private_files import private_dir, read_private, write_private
from airflow_epochs.process_identity import NotOurProcess, ProcessIdentity, identify, stop_verified
from airflow_epochs.servers.liveness import FloodWatch

__all__ = ["RunStillActive", "ServerRecord", "ZooKeeperSupervisor", "current_run", "read_record", "reap_leftover",
           "write_record"]


if TYPE_CHECKING:
    from airflow_epochs.servers.embedded_zookeeper import ZooKeeperEnsemble


class RunStillActive(RuntimeError):
    """The server recorded in a state folder belongs to a run that is still alive."""


@dataclass(frozen=True)
class ServerRecord:
    """A server a run started.

    :param name: what it is (``zookeeper``, ``spark-connect``).
    :param server: the server process's identity, taken once it served.
    :param owner: the identity of the run that started it (None for a detached server).
    :param group: whether the server leads its own process group (stopped as a group).
    :param details: port, URL, directory: whatever the owner wants to find again.
    """

    name: str
    server: ProcessIdentity
    owner: ProcessIdentity | None = None
    group: bool = True
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "server": self.server.to_json(),
                "owner": self.owner.to_json() if self.owner else None, "group": self.group,
                "details": dict(self.details)}

    @classmethod
    def from_json(cls, data: Any) -> ServerRecord:
        if not isinstance(data, dict) or "server" not in data:
            raise ValueError(f"not a server record: {data!r}")
        owner = data.get("owner")
        details = data.get("details") or {}
        if not isinstance(details, dict):
            raise ValueError(f"the details of a server record must be an object, not {type(details).__name__}")
        return cls(str(data.get("name", "server")), ProcessIdentity.from_json(data["server"]),
                   ProcessIdentity.from_json(owner) if owner else None, bool(data.get("group", True)),
                   dict(details))


def current_run() -> ProcessIdentity:
    """This process's identity (the owner of the servers it starts)."""
    me = identify(os.getpid())
    if me is None:  # pragma: no cover - a process can always read its own /proc entry
        raise RuntimeError("cannot read this process's own identity")
    return me


def write_record(path: Path, record: ServerRecord) -> None:
    """Write ``record`` to ``path`` (mode 0600 in a private folder, replaced atomically, no link followed)."""
    private_dir(path.parent)
    write_private(path, json.dumps(record.to_json()))


def read_record(path: Path) -> ServerRecord | None:
    """The record at ``path``; None if there is none. :class:`ValueError` (naming the file) if it is
    not a record; :class:`~airflow_epochs.private_files.UnsafeState` if another user owns or may write it."""
    try:
        text = read_private(path)
    except FileNotFoundError:
        return None
    try:
        return ServerRecord.from_json(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def reap_leftover(path: Path) -> str | None:
    """Deal with the server recorded at ``path`` by an earlier run (see the module docstring) and
    remove the record; returns what was done, in words, or None if nothing was recorded.

    :raises RunStillActive: the recorded server and the run that started it are both alive.
    """
    record = read_record(path)
    if record is None:
        return None
    if identify(record.server.pid) is None:
        path.unlink(missing_ok=True)
        return f"the {record.name} server of an earlier run ({record.server.describe()}) had already exited"
    if record.owner is not None and record.owner.alive():
        raise RunStillActive(
            f"the {record.name} server {record.server.describe()} belongs to a run that is still alive "
            f"({record.owner.describe()}); wait for it to finish, or stop it first"
        )
    try:
        stop_verified(record.server, group=record.group)
    except NotOurProcess:
        path.unlink(missing_ok=True)
        return f"pid {record.server.pid} recorded for the {record.name} server now runs another program: left alone"
    path.unlink(missing_ok=True)
    return f"stopped the {record.name} server left by a run that was killed ({record.server.describe()})"


class ZooKeeperSupervisor:
    """Restarts an embedded ZooKeeper member that exited on its own (a crash, an OOM kill, ``kill -9``), or
    that still runs but has not answered a health probe (``srvr``, over our mutual TLS) for
    ``unresponsive_after`` seconds (a wedged JVM: its port no longer listening, its threads stuck), on
    the same port and data, so that the run rides through: the clients' sessions resume (their timeout
    permitting) or reconnect, and the tasks' retries find it again. A member that does not answer while
    another local user floods its port, and runs and works through it, is not restarted (said once).

    Start it from a thread that lives as long as the run, like the server: a server started with
    ``die_with_parent`` is restarted from the supervisor's own thread, which ends only at :meth:`stop`.

    :param server: the ensemble (or single server) to watch.
    :param on_restart: called with the member's index after each restart (to record its new identity).
    :param say: where to report a restart (one line).
    :param interval: seconds between looks.
    :param unresponsive_after: seconds without an answer to the probe before a running member is killed
        and restarted (long enough for a full garbage collection on a busy machine).
    :param probe_every: seconds between health probes of a running member.
    """

    def __init__(self, server: ZooKeeperEnsemble, *, on_restart: Callable[[int], None] | None = None,
                 say: Callable[[str], None] = print, interval: float = 0.5, unresponsive_after: float = 30.0,
                 probe_every: float = 2.0) -> None:
        self.server = server
        self.on_restart = on_restart
        self.say = say
        self.interval = interval
        self.unresponsive_after = unresponsive_after
        self.probe_every = probe_every
        self.restarts = 0
        self._answered: dict[int, float] = {}  # member index -> when it last answered a probe
        self._probed: dict[int, float] = {}
        self._floods: dict[int, FloodWatch] = {}  # member index -> its flood watch
        self._flooded: set[int] = set()  # members said to be busy with a flood
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="zookeeper-supervisor", daemon=True)

    def start(self) -> ZooKeeperSupervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (before the server is stopped on purpose)."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=120)

    def _watch(self) -> None:
        while not self._stopping.wait(self.interval):
            for index, member in enumerate(self.server.members):
                process = member.process
                if process is None or self._stopping.is_set():
                    continue
                if process.poll() is None:
                    why = self._unresponsive(index)
                    if why is None:
                        continue
                else:
                    why = f"exited ({process.returncode})"
                began = time.monotonic()
                try:
                    self.server.restart(index)  # kills a live but wedged member first
                except Exception as exc:  # noqa: BLE001 - reported; the next look tries again
                    self.say(f"ZooKeeper member {member.myid} {why} and did not restart: {exc}")
                    continue
                self._answered[index] = time.monotonic()
                self.restarts += 1
                self.say(f"ZooKeeper member {member.myid} {why}: restarted on the same port "
                         f"{member.client_port} and data in {time.monotonic() - began:.1f} s")
                if self.on_restart is not None:
                    self.on_restart(index)

    def _unresponsive(self, index: int) -> str | None:
        """Why member ``index`` (running) is to be restarted, or None while it answers in time, or while it
        runs and works through another user's flood of sockets (see :mod:`airflow_epochs.servers.liveness`)."""
        now = time.monotonic()
        self._answered.setdefault(index, now)
        if now - self._probed.get(index, 0.0) < self.probe_every:
            return None
        self._probed[index] = now
        member = self.server.members[index]
        if member.mode() is not None:
            self._answered[index] = time.monotonic()
            self._flood_ended(index)
            return None
        process = member.process
        ports = [port for port in (member.client_port, member.secure_port) if port]
        flood = self._floods.setdefault(index, FloodWatch()).busy_with_flood(process.pid, ports) \
            if process is not None else None
        if flood is not None:  # alive and busy with the flood: a restart would drop our sessions, end nothing
            self._answered[index] = time.monotonic()
            if index not in self._flooded:
                self._flooded.add(index)
                self.say(f"ZooKeeper member {member.myid} does not answer while {flood.describe()}: a flood, not "
                         "a dead server; not restarting it (a restart would drop our sessions and not end the flood)")
            return None
        self._flood_ended(index)
        silent = time.monotonic() - self._answered[index]
        return f"has not answered for {silent:.0f} s" if silent >= self.unresponsive_after else None

    def _flood_ended(self, index: int) -> None:
        if index in self._flooded:
            self._flooded.discard(index)
            self.say(f"ZooKeeper member {self.server.members[index].myid}: the flood has ended or no longer "
                     "keeps it busy")
