"""Something expensive and read-only (a migrated database template) built once for the whole test run,
even when pytest-xdist spreads the run over worker processes: the first worker to ask builds it under
a lock in the run's common temporary folder, the others wait for it and reuse it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)`` run once per test run on an empty ``folder``; returns what it returned.

    Without xdist this is just a new temporary folder. Under xdist every worker's temporary folder
    sits in one folder of the run (``pytest-N/popen-gwK``): the result lives next to them, and a
    marker file written after a successful build tells later workers it is complete. What a build
    returns must be read-only to its users (they copy it), since all workers share it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    run_folder = tmp_path_factory.getbasetemp().parent
    folder = run_folder / name
    done = run_folder / f"{name}.built"
    with open(run_folder / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return Path(done.read_text())
        folder.mkdir()  # a failed earlier attempt left it behind: fail loudly rather than reuse it
        result = build(folder)
        done.write_text(str(result))
        return result
