"""The demo's servers never outlive it: the demo is killed (-9) in the middle of its first epoch, and
no process of that run is left once the rerun (which resumes the epoch) is done; the servers went with
the killed run, and the rerun found their records and checked them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airflow_epochs.process_identity import ProcessIdentity, identify
from airflow_epochs.servers.supervision import read_record

# Each step has a budget of its own, and pytest's is their sum with room to spare: under a load of 30 on
# two cores a one-day demo takes ten times its idle minute, and a test that runs out of pytest's time
# loses the output that says where the time went.
FIRST_EPOCH_S = 300
RERUN_S = 600
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(FIRST_EPOCH_S + RERUN_S + 150)]

REPO = Path(__file__).resolve().parents[2]


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _demo_env() -> dict[str, str]:
    # The demo sets up its own Airflow home and connections: none of the test session's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}


def test_a_rerun_after_kill_9_leaves_no_process_of_the_killed_run(tmp_path):
    state = tmp_path / "demo"
    demo = [sys.executable, str(REPO / "scripts" / "demo.py"), "--state-dir", str(state)]
    first = subprocess.Popen([*demo, "--days", "1"], env=_demo_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    tree: dict[int, ProcessIdentity] = {}
    # The reading loop below blocks on the demo's output: a timer kills a run that never gets there.
    watchdog = threading.Timer(FIRST_EPOCH_S, first.kill)
    watchdog.start()
    try:
        assert first.stdout is not None
        for line in first.stdout:
            seen.append(line)
            if "epoch 1 +" in line and "opened" in line:
                break
        else:
            pytest.fail(f"the first run did not open epoch 1 within {FIRST_EPOCH_S} s:\n" + "".join(seen[-40:]))
        watchdog.cancel()
        time.sleep(1.0)  # its Spark jobs are starting on the Spark Connect server
        records = {name: read_record(state / "servers" / f"{name}.json") for name in ("zookeeper", "spark-connect")}
        assert all(records.values()), records
        for pid in _descendants(first.pid) | {r.server.pid for r in records.values() if r}:
            identity = identify(pid)
            if identity is not None:
                tree[pid] = identity
        servers = {r.server.pid for r in records.values() if r}
        assert servers <= set(tree), (servers, tree)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        watchdog.cancel()
        if first.poll() is None:
            first.kill()
            first.wait()
    # The servers were started to die with the demo: they go right away, without waiting for a rerun.
    deadline = time.monotonic() + 30
    while any(identity.alive() for pid, identity in tree.items() if pid in servers):
        assert time.monotonic() < deadline, "the killed run's servers outlived it"
        time.sleep(0.2)

    try:
        rerun = subprocess.run([*demo, "--days", "1"], env=_demo_env(), capture_output=True, text=True,
                               timeout=RERUN_S)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout
        pytest.fail(f"the rerun did not finish within {RERUN_S} s; its output ended:\n{(out or '')[-4000:]}")
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-2000:]
    assert "server of an earlier run" in rerun.stdout, rerun.stdout[:2000]  # it looked at the records
    assert "check: sealed results vs one Spark computation over days 1..1" in rerun.stdout
    left = {pid: identity.describe() for pid, identity in tree.items() if identity.alive()}
    assert not left, left
    assert not list((state / "servers").glob("*.json"))  # the rerun's own servers are stopped and forgotten


def test_the_plain_demo_rides_through_a_zookeeper_kill(tmp_path):
    """ZooKeeper's JVM is killed (-9) while the demo's first epoch runs: the demo's supervisor restarts it
    on the same port and data, and the run finishes by itself with every epoch sealed and checked."""
    state = tmp_path / "demo"
    demo = subprocess.Popen([sys.executable, str(REPO / "scripts" / "demo.py"), "--state-dir", str(state),
                             "--days", "2"], env=_demo_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen: list[str] = []
    killed = None
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            seen.append(line)
            if killed is None and "epoch 1 (" in line and "open ->" in line:
                record = read_record(state / "servers" / "zookeeper.json")
                assert record is not None and record.server.alive()
                killed = record.server
                os.kill(killed.pid, signal.SIGKILL)
        demo.wait(540)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    output = "".join(seen)
    assert killed is not None, output[-3000:]
    assert demo.returncode == 0, output[-4000:]
    assert "restarted on the same port" in output, output[-4000:]
    assert "check: sealed results vs one Spark computation over days 1..2" in output, output[-3000:]
    assert not killed.alive()
