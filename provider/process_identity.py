"""Who a pid is: the identity of a process we started, recorded at start and checked before any signal.

A pid alone names a process only while it lives: after it exits, the kernel hands the number to the
next process. A state file that says "pid 4242" can therefore point at an unrelated program (and
with ``killpg``, at its whole group). So we record, once a server is up, its pid, its start time (in
clock ticks since boot, from ``/proc/<pid>/stat``), the boot it belongs to and its command line; a
stop signals only a process that still matches all of them, and otherwise says why not.

Where ``/proc`` is missing (macOS), ``ps -o lstart= -o command=`` gives the start time and command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["NotOurProcess", "ProcessIdentity", "identify", "stop_verified"]

_PROC = Path("/proc")


class NotOurProcess(RuntimeError):
    """The pid is alive but it is not the process that was recorded: it is left alone."""


@dataclass(frozen=True)
class ProcessIdentity:
    """What makes a running process the one we started.

    :param pid: process id.
    :param started: start time (clock ticks since boot under ``/proc``, else ``ps``'s start time).
    :param boot: the boot id (``/proc/sys/kernel/random/boot_id``), so a reboot that reuses the pid
        and tick count cannot fool the check ("" where unknown).
    :param argv: the command line.
    """

    pid: int
    started: str
    boot: str
    argv: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "argv": list(self.argv)}

    @classmethod
    def from_json(cls, data: Any) -> ProcessIdentity:
        """Read a recorded identity; :class:`ValueError` naming what is wrong if it is malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"a process identity must be an object, not {data!r}")
        try:
            pid, started, boot, argv = int(data["pid"]), str(data["started"]), str(data["boot"]), data["argv"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed process identity {data!r}: {exc}") from None
        if pid <= 0 or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"malformed process identity {data!r}")
        return cls(pid, started, boot, tuple(argv))

    def describe(self) -> str:
        command = " ".join(self.argv)
        return f"pid {self.pid} ({command[:120]}{'...' if len(command) > 120 else ''})"

    def alive(self) -> bool:
        """Whether this very process still runs (same pid, start time, boot and command line)."""
        return identify(self.pid) == self


def _boot_id() -> str:
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of the running process ``pid``, or None if there is none (or it is a zombie)."""
    if pid <= 0:
        return None
    if _PROC.joinpath("self").exists():
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
            raw = (_PROC / str(pid) / "cmdline").read_bytes()
            for _ in range(50):  # a process still in exec shows no command line for a moment
                if raw:
                    break
                time.sleep(0.01)
                raw = (_PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            return None
        # The command name (field 2) is in parentheses and may itself hold spaces or ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            return None
        argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
        return ProcessIdentity(pid, fields[19], _boot_id(), argv)
    return _identify_with_ps(pid)


def _identify_with_ps(pid: int) -> ProcessIdentity | None:
    ps = shutil.which("ps")
    if ps is None:
        return None
    try:
        out = subprocess.run([ps, "-p", str(pid), "-o", "stat=", "-o", "lstart=", "-o", "command="],
                             capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not out or out.startswith("Z"):
        return None
    parts = out.split(None, 6)  # stat, then lstart's five words ("Mon Jan  1 10:00:00 2024"), then the command
    if len(parts) < 7:
        return None
    return ProcessIdentity(pid, " ".join(parts[1:6]), "", tuple(parts[6].split()))


def stop_verified(recorded: ProcessIdentity, *, group: bool = False, timeout: float = 20.0) -> bool:
    """Stop the recorded process (SIGTERM, then SIGKILL after ``timeout``), its process group too
    with ``group``, only if it is still that process.

    :returns: True if it was running and is now stopped, False if it had already exited.
    :raises NotOurProcess: the pid runs another program (nothing is signalled).
    """
    current = identify(recorded.pid)
    if current is None:
        return False
    if current != recorded:
        raise NotOurProcess(
            f"pid {recorded.pid} is not the process that was started: recorded {recorded.describe()} started at "
            f"{recorded.started}, found {current.describe()} started at {current.started}; not signalling it"
        )
    _signal(recorded.pid, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and identify(recorded.pid) == recorded:
        _reap(recorded.pid)
        time.sleep(0.1)
    if identify(recorded.pid) == recorded:
        _signal(recorded.pid, signal.SIGKILL, group)
    # Until its parent reaps it, an exited process keeps its pid as a zombie: wait a little for that
    # too, so that "stopped" also means "gone" to whoever looks right after.
    settle = time.monotonic() + 5.0
    while time.monotonic() < settle and identify(recorded.pid) is None and _pid_exists(recorded.pid):
        _reap(recorded.pid)
        time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # only succeeds for our own child


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group and os.getpgid(pid) == pid:  # only a group it leads: never another program's group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
