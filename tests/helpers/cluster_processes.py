"""Stopping a component's process group (for :mod:`cluster_topology`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM the group of ``proc``, wait, then KILL what is left of it."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(20)
    # the leader gone, what it started in its group goes too (a Spark worker's executors)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
