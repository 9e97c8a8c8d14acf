"""Real server-side session expiry: a coordinator frozen with SIGSTOP past its session timeout loses
its session on the server, a standby takes over and seals, and the resumed zombie writes nothing."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zk_helpers import tree

from airflow_epochs.coordination import EpochLedger, NotLeader, PipelineConfig

ZOMBIE_WORKER = Path(__file__).resolve().parents[1] / "helpers" / "zombie_worker.py"

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_frozen_coordinator_is_fenced_after_takeover(zk, zk_server, zk_chroot):
    ledger = EpochLedger(zk, "expiry", owner="standby")
    ledger.create_pipeline(PipelineConfig({"out": ("x", "y")}))
    worker = subprocess.Popen(
        [sys.executable, str(ZOMBIE_WORKER), zk_server.address + zk_chroot],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=zk_server.env(),
    )
    try:
        ready = worker.stdout.readline()
        assert ready.startswith("READY"), worker.stderr.read()
        zombie_token = int(ready.split()[1])
        assert zk.exists("/zombie-alive")
        os.kill(worker.pid, signal.SIGSTOP)

        # The server, not the client, must expire the session: its ephemeral node disappears.
        deadline = time.monotonic() + 20
        while zk.exists("/zombie-alive"):
            assert time.monotonic() < deadline, "the server never expired the frozen session"
            time.sleep(0.1)

        lease = EpochLedger(zk, "expiry", owner="standby").lease(duration=datetime.timedelta(seconds=30))
        deadline = time.monotonic() + 10
        while True:
            try:
                lease.acquire()
                break
            except NotLeader:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        successor = ledger.open_epoch(1, takeover=True)
        assert successor.token == zombie_token + 1
        ledger.vote(successor, "out", "x", {"by": "standby"})
        assert ledger.vote(successor, "out", "y", {"by": "standby"}).epoch_sealed
        before = tree(zk)

        os.kill(worker.pid, signal.SIGCONT)
        worker.stdin.write("go\n")
        worker.stdin.flush()
        out, err = worker.communicate(timeout=60)
        lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
        assert lines["LEASE_HELD"] == "False", out + err
        assert lines["OLD_HANDLE"] in ("SessionLost", "AttemptSuperseded"), out + err
        assert lines["FRESH_CLIENT"] == "EpochAlreadySealed", out + err
        assert tree(zk) == before  # nothing written by the zombie
        seal = ledger.seal(1, "out")
        assert seal.attempt == successor.token
        assert seal.manifests == {"x": {"by": "standby"}, "y": {"by": "standby"}}
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGCONT)
            worker.kill()
