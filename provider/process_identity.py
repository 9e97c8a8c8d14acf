"""Who a pid is: the identity of a process we started, recorded at start and checked before any signal.

A pid alone names a process only while it lives: after it exits, the kernel hands the number to the
next process. A state file that says "pid 4242" can therefore point at an unrelated program (and
with ``killpg``, at its whole group). So we record, once a server is up, its pid, its start time (in
clock ticks since boot, from ``/proc/<pid>/stat``), the boot it belongs to, its command line, its
owner's uid and a secret nonce we put in its environment at launch (:func:`launch_environment`); a
stop signals only a process that still matches all of them, and otherwise says why not.

Start time and command line can be copied from any process's world-readable ``/proc`` entries, so
they alone would let whoever writes a state file name a victim. The nonce cannot be copied: it lives
only in our 0600 state and in ``/proc/<pid>/environ``, which only the process's owner (and root)
can read; a process that carries it was started by us.

Where ``/proc`` is missing (macOS), ``ps -o lstart= -o command=`` gives the start time and command.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NONCE_ENV", "NotOurProcess", "ProcessIdentity", "identify", "launch_environment", "stop_verified"]

_PROC = Path("/proc")
NONCE_ENV = "AIRFLOW_EPOCHS_SERVER_NONCE"


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
    :param uid: the process's (effective) owner, -1 where unknown.
    :param nonce: the secret nonce in its environment (``$AIRFLOW_EPOCHS_SERVER_NONCE``), "" if none
        or unreadable; kept out of ``repr`` and messages.
    """

    pid: int
    started: str
    boot: str
    argv: tuple[str, ...]
    uid: int = -1
    nonce: str = field(default="", repr=False)

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
        uid, nonce = data.get("uid", -1), data.get("nonce", "")
        if (pid <= 0 or pid > 1 << 22 or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)
                or not isinstance(uid, int) or isinstance(uid, bool) or not isinstance(nonce, str)):
            raise ValueError(f"malformed process identity (pid {data.get('pid')!r})")
        return cls(pid, started, boot, tuple(argv), uid, nonce)

    def describe(self) -> str:
        command = " ".join(self.argv)
        return f"pid {self.pid} ({command[:120]}{'...' if len(command) > 120 else ''})"

    def alive(self) -> bool:
        """Whether this very process still runs (same pid, start time, boot, command line, owner and nonce)."""
        return identify(self.pid) == self


def launch_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to start a server with: ``base`` (this process's by default) plus a new secret
    nonce, which :func:`identify` then reads back from the running server."""
    return {**(os.environ if base is None else base), NONCE_ENV: secrets.token_urlsafe(24)}


def _nonce(pid: int) -> str:
    try:  # readable only by the process's owner and root
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return ""
    prefix = NONCE_ENV.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return ""


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
            uid = (_PROC / str(pid)).stat().st_uid
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
        return ProcessIdentity(pid, fields[19], _boot_id(), argv, uid, _nonce(pid))
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
    :raises NotOurProcess: the pid runs another program, or the record carries no nonce or names
        another user (nothing is signalled).
    """
    current = identify(recorded.pid)
    if current is None:
        return False
    if not recorded.nonce or recorded.uid != os.geteuid():
        raise NotOurProcess(
            f"pid {recorded.pid} is not the process that was started: its record has no launch nonce or names "
            f"another owner (uid {recorded.uid}), so we did not start it; not signalling it"
        )
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
