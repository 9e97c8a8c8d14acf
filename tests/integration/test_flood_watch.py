"""Issue 48, item 5: how the supervisor and the CLI's watchdog tell another user's flood from a dead server
(``servers/liveness.py``, over ``connection/socket_census.py``), against a real flood of a second local user:
its sockets are counted by owner (ours never), and a silent server counts as busy with the flood only while
it runs and uses CPU, never when it is stopped or makes no progress."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from intruder import second_user

from airflow_epochs.connection.socket_census import FLOOD_CONNECTIONS, flood_on, foreign_connections
from airflow_epochs.servers.liveness import FloodWatch

pytestmark = [pytest.mark.integration]

HOLD = r"""
import socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
print("HOLDING", len(held), flush=True)
sys.stdin.read()
"""


def test_a_flood_is_counted_by_owner_and_excuses_only_a_server_that_works_through_it():
    with socket.socket() as listener, second_user() as intruder:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4096)
        port = listener.getsockname()[1]
        ours = [socket.create_connection(("127.0.0.1", port)) for _ in range(FLOOD_CONNECTIONS)]
        assert flood_on(port) is None and foreign_connections(port) == {}  # our own sockets are no flood
        count = FLOOD_CONNECTIONS + 100
        holder = intruder.popen(["/usr/bin/python3", "-I", "-c", HOLD, str(port), str(count)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        idle = subprocess.Popen(["sleep", "300"])
        stopped = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            assert holder.stdout is not None and holder.stdout.readline().split() == ["HOLDING", str(count)]
            flood = flood_on(port)
            assert flood is not None and flood.by_uid == {intruder.uid: count}, flood
            assert intruder.name in flood.describe() and f"{count:,}" in flood.describe()
            os.kill(stopped.pid, signal.SIGSTOP)
            time.sleep(0.2)
            watches = {name: FloodWatch() for name in ("busy", "idle", "stopped")}
            pids = {"busy": busy.pid, "idle": idle.pid, "stopped": stopped.pid}
            first = {name: watches[name].busy_with_flood(pid, [port]) for name, pid in pids.items()}
            time.sleep(1)
            second = {name: watches[name].busy_with_flood(pid, [port]) for name, pid in pids.items()}
            assert first["busy"] is not None and second["busy"] is not None  # runs and works: the flood's doing
            assert first["stopped"] is None and second["stopped"] is None  # frozen: restart it
            assert second["idle"] is None  # no CPU at all between two looks: its silence is its own
            assert FloodWatch().busy_with_flood(busy.pid, [port + 1 if port < 65535 else port - 1]) is None
        finally:
            for process in (busy, idle, stopped):
                process.kill()
                process.wait()
            holder.communicate("", timeout=60)
            for sock in ours:
                sock.close()
