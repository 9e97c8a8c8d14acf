"""Run a command that dies with the process that started it::

    python -m airflow_epochs.servers.die_with_parent PARENT_PID -- COMMAND [ARG ...]

On Linux the kernel sends the command SIGTERM when its parent exits, however it exits (``kill -9``
included: ``PR_SET_PDEATHSIG``, kept across the ``exec`` into the command, so the pid, process group
and recorded identity are the command's own). The signal follows the parent *thread* that started
the child: start such servers from a thread that lives as long as the run (the main thread).
Elsewhere the command simply runs; whoever starts the next run then finds it through its recorded
identity (see :mod:`airflow_epochs.process_identity`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1


def launcher(parent_pid: int | None = None) -> list[str]:
    """The argv prefix that makes a command die with ``parent_pid`` (this process by default).

    Isolated (``-I``): ``-m`` would otherwise put the working folder first on ``sys.path``, and a
    planted ``airflow_epochs/`` there would run in place of this module; the caller also gives the
    process an explicit working folder of its own."""
    return [sys.executable, "-I", "-m", "airflow_epochs.servers.die_with_parent", str(parent_pid or os.getpid()), "--"]


def arm(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel for ``sig`` when this process's parent exits; False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        print("usage: python -m airflow_epochs.servers.die_with_parent PARENT_PID -- COMMAND [ARG ...]",
              file=sys.stderr)
        return 2
    arm()
    if os.getppid() != int(args[0]):
        return 1  # the parent died before the signal was armed: do not start an orphan
    command = args[2:]
    os.execvp(command[0], command)  # noqa: S606 - the caller's own argv list, run in place of this process
    return 127  # pragma: no cover - execvp returns only by raising


if __name__ == "__main__":
    sys.exit(main())
