"""The watchdog of the detached embedded ZooKeeper (``airflow-epochs zookeeper start``): a detached process
of its own that restarts the server on the same port and data when it has exited, or when it still runs
but has not answered ``srvr`` over our mutual TLS for ``unresponsive_after`` seconds (a wedged JVM: its
port no longer answering, its threads stuck), unless it runs and works through another local user's
flood of sockets (:mod:`airflow_epochs.servers.liveness`): a restart would then only drop our sessions.
``zookeeper start`` starts it (one per state folder), ``zookeeper stop`` stops it before the server; it
ends by itself once no server is recorded.

A restart kills the recorded server (checked by its identity, as ``stop`` does) under the state folder's
lock, then runs ``zookeeper start`` as a child command, whose server outlives it like any detached one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import stop_recorded
from airflow_epochs.connection.embedded import alive, read_state, running_server, state_file
from airflow_epochs.private_files import open_private_log, write_private
from airflow_epochs.process_identity import identify, launch_environment
from airflow_epochs.servers.liveness import FloodWatch

NAME = "zookeeper-watchdog"
UNRESPONSIVE_AFTER = 30.0  # long enough for a full garbage collection on a busy machine
PROBE_EVERY = 2.0


def start_watchdog(base: Path, *, unresponsive_after: float = UNRESPONSIVE_AFTER,
                   probe_every: float = PROBE_EVERY) -> dict[str, Any]:
    """Start the watchdog of ``base``'s server, unless one runs already; returns its state."""
    current = read_state(base, NAME)
    if current and alive(current):
        return current
    with open(open_private_log(base / f"{NAME}.log"), "ab") as out:
        process = subprocess.Popen(  # argv list, isolated interpreter, a folder of ours: no code from elsewhere
            [sys.executable, "-I", "-m", "airflow_epochs.cli.zookeeper_watchdog", str(base),
             str(unresponsive_after), str(probe_every)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, umask=0o077,
            cwd=base, env=launch_environment())
    identity = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:  # its identity once it runs our module
        identity = identify(process.pid)
        if identity is not None and "airflow_epochs.cli.zookeeper_watchdog" in identity.argv and identity.nonce:
            break
        identity = None
        time.sleep(0.05)
    if identity is None:
        process.kill()
        raise RuntimeError(f"the ZooKeeper watchdog did not start (see {base / f'{NAME}.log'})")
    state = {"pid": process.pid, "identity": identity.to_json(),
             "unresponsive_after": unresponsive_after}
    write_private(state_file(base, NAME), json.dumps(state))
    return state


def stop_watchdog(base: Path) -> bool:
    """Stop ``base``'s watchdog (checked by its identity); whether one was running."""
    return stop_recorded(base, NAME, group=True, keep=())  # with a restart it may be running


def watch(base: Path, *, unresponsive_after: float, probe_every: float,
          say: Callable[[str], None] = print) -> None:
    """Watch ``base``'s server until none is recorded; restart it when it exited or stopped answering."""
    from airflow_epochs.cli.zookeeper import ZOOKEEPER

    answered = time.monotonic()
    failed = False  # the last restart failed: the server is down on purpose of nobody's, try again
    floods = FloodWatch()
    flooded = False
    while True:
        time.sleep(probe_every)
        state = read_state(base)
        if not failed and (not state or "pid" not in state):
            say("no ZooKeeper recorded as running: the watchdog ends")
            return
        if running_server(base) is not None:
            answered = time.monotonic()
            continue
        flood = None if failed or not state else floods.busy_with_flood(
            int(state["pid"]), {int(state[key]) for key in ("port", "secure_port") if state.get(key)})
        if flood is not None:  # alive and working through another user's flood: a restart ends nothing
            answered = time.monotonic()
            if not flooded:
                say(f"ZooKeeper does not answer while {flood.describe()}: a flood, not a dead server; not "
                    "restarting it (a restart would drop our sessions and not end the flood)")
            flooded = True
            continue
        flooded = False
        silent = time.monotonic() - answered
        exited = failed or not alive(state or {})
        if not exited and silent < unresponsive_after:
            continue
        why = "exited" if exited else f"has not answered for {silent:.0f} s"
        with ZOOKEEPER.exclusive(base, "restart"):
            state = read_state(base)
            if not failed and (not state or "pid" not in state):  # stopped meanwhile
                return
            if running_server(base) is not None:
                answered = time.monotonic()
                continue
            # The wedged JVM, checked by its identity; its ports stay recorded (not ZOOKEEPER.stop: that stops us).
            stop_recorded(base, ZOOKEEPER.name, group=ZOOKEEPER.stop_group, keep=ZOOKEEPER.keep_on_stop)
        began = time.monotonic()
        restart = subprocess.run([sys.executable, "-I", "-m", "airflow_epochs.cli", "--state-dir", str(base),
                                  "zookeeper", "start"], capture_output=True, text=True, timeout=600, cwd=base,
                                 stdin=subprocess.DEVNULL)
        answered = time.monotonic()
        failed = restart.returncode != 0
        if not failed:
            say(f"ZooKeeper {why}: restarted on the same port and data in {time.monotonic() - began:.1f} s")
        else:
            say(f"ZooKeeper {why} and did not restart: {restart.stderr.strip()[-2000:]}")


def main(argv: list[str]) -> None:
    base, unresponsive_after, probe_every = Path(argv[0]), float(argv[1]), float(argv[2])
    watch(base, unresponsive_after=unresponsive_after, probe_every=probe_every,
          say=lambda line: print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}", flush=True))


if __name__ == "__main__":
    main(sys.argv[1:])
