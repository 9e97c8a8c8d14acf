"""Issue 35: the detached embedded ZooKeeper (``airflow-epochs zookeeper start``) has a watchdog that
restarts it, on the same port and data, when it stops answering (a frozen JVM: alive, silent) and when
it exits; ``zookeeper stop`` stops the watchdog first, so nothing restarts a server stopped on purpose."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zk_helpers import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

CLI = str(Path(sys.executable).parent / "airflow-epochs")


def _cli(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--state-dir", str(base), "zookeeper", *args], capture_output=True, text=True,
                          timeout=300)


def _state(base: Path, name: str = "zookeeper") -> dict:
    path = base / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _restarted(base: Path, old_pid: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(base)
        if state.get("pid") not in (None, old_pid) and _cli(base, "status").returncode == 0:
            return state
        time.sleep(1)
    raise AssertionError(f"not restarted within {timeout:g} s; watchdog log:\n"
                         + (base / "zookeeper-watchdog.log").read_text(errors="replace")[-3000:])


def test_the_watchdog_restarts_a_frozen_or_exited_server_and_stop_stops_it(tmp_path):
    base = tmp_path / "epochs"
    started = _cli(base, "start", "--unresponsive-after", "5")
    assert started.returncode == 0, started.stderr
    assert "watchdog pid" in started.stdout, started.stdout
    first = _state(base)
    watchdog = _state(base, "zookeeper-watchdog")["pid"]
    frozen = int(first["pid"])
    try:
        os.kill(frozen, signal.SIGSTOP)  # alive, port open, nothing answers
        second = _restarted(base, frozen)
        assert second["port"] == first["port"] and not pid_alive(frozen)
        log = (base / "zookeeper-watchdog.log").read_text()
        assert "has not answered for" in log and "restarted on the same port and data" in log, log
        os.kill(int(second["pid"]), signal.SIGKILL)  # a crash
        third = _restarted(base, int(second["pid"]))
        assert third["port"] == first["port"] and "exited: restarted" in (base / "zookeeper-watchdog.log").read_text()
        assert _state(base, "zookeeper-watchdog")["pid"] == watchdog  # the same watchdog throughout
        stopped = _cli(base, "stop")
        assert stopped.returncode == 0 and "ZooKeeper stopped" in stopped.stdout, stopped
        time.sleep(8)  # longer than the watchdog's probe and its 5 s: nothing comes back
        assert not pid_alive(watchdog) and not pid_alive(int(third["pid"]))
        assert "pid" not in _state(base) and _cli(base, "status").returncode == 1
    finally:
        if pid_alive(frozen):
            os.kill(frozen, signal.SIGKILL)
        _cli(base, "stop")
