"""Whether a ZooKeeper that does not answer our health probe is dead or wedged, or alive and busy with
another local user's flood of idle sockets.

A flood keeps our probe (a new connection) out for as long as it lasts, like a dead server would; a
restart would then drop every session our clients hold and end nothing, since the flood goes on against
the restarted server. So a watchdog restarts a silent server only when no flood is seen, or when the
server is not making progress through it: stopped (a frozen JVM, ``SIGSTOP``), a zombie, or using no CPU
at all between two looks (a live server accepting and closing thousands of sockets always does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from airflow_epochs.connection.socket_census import Flood, flood_on

__all__ = ["FloodWatch"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_and_state(pid: int) -> tuple[float, str] | None:
    """The CPU seconds ``pid`` has used and its state letter (``R``, ``S``, ``T``...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as source:
            text = source.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS, fields[0]


class FloodWatch:
    """Tells, for one server process at a time, a flood it is busy with from a silence of its own.

    ``busy_with_flood(pid, ports)`` is called when the server did not answer a probe: it returns the
    flood when other accounts hold a flood of connections to one of ``ports`` and the process runs and has
    used CPU since the previous call (None otherwise: then the silence is the server's own).
    """

    def __init__(self) -> None:
        self._cpu: dict[int, float] = {}

    def busy_with_flood(self, pid: int, ports: Iterable[int]) -> Flood | None:
        seen = _cpu_and_state(pid)
        if seen is None:
            return None
        cpu, state = seen
        before = self._cpu.get(pid)
        self._cpu = {pid: cpu}  # one process at a time: a restarted server starts afresh
        if state in ("T", "t", "Z", "X") or (before is not None and cpu <= before):
            return None  # stopped, a zombie, or no progress at all: not the flood's doing
        for port in ports:
            flood = flood_on(port)
            if flood is not None:
                return flood
        return None
