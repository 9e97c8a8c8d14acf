"""Waiting for a component to be ready, and stopping its process group (for :mod:`cluster_topology`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any


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


def wait_ready(ready: Any, timeout: float, what: str, cluster: Any, name: str) -> None:
    """Until ``ready()``; raises with the end of component ``name``'s log when it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not ready():
        proc = cluster.procs.get(name) or (cluster.stack.procs.get(name) if cluster.stack else None)
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            folder = cluster.launches[name][2] if name in cluster.launches else cluster.base / "airflow"
            log = folder / f"{name}.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start:\n{tail}")
        time.sleep(0.3)
