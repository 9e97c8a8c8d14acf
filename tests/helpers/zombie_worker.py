"""A coordinator process that will be frozen (SIGSTOP) past its session timeout by test_session_expiry.

It opens epoch 1, votes one of two producers, takes the leadership lease and an ephemeral marker, says
READY, then waits for a line on stdin. After being resumed it tries to finish the epoch twice: with its
old handles (abandoned because the session was LOST) and, like a zombie that reconnected, with a fresh
client and the old fencing token. It prints one line per outcome.
"""

from __future__ import annotations

import datetime
import sys
import time

from zk_test_server import connect

from airflow_epochs.coordination import Attempt, EpochLedger


def main(hosts: str) -> None:
    client = connect(hosts, start=False, timeout=2.0)
    client.start(timeout=15)
    ledger = EpochLedger(client, "expiry", owner="zombie")
    lease = EpochLedger(client, "expiry", owner="zombie").lease(duration=datetime.timedelta(seconds=2))
    lease.acquire()
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "out", "x", {"by": "zombie"})
    client.create("/zombie-alive", b"", ephemeral=True)
    print(f"READY {attempt.token}", flush=True)
    sys.stdin.readline()
    time.sleep(1.0)  # let kazoo notice the expired session, as a resumed process would soon enough
    print(f"LEASE_HELD {lease.is_held()}", flush=True)
    for label, call in (
        ("OLD_HANDLE", lambda: ledger.vote(attempt, "out", "y", {"by": "zombie"})),
        ("FRESH_CLIENT", lambda: fresh_vote(hosts, attempt.to_dict())),
    ):
        try:
            call()
            print(f"{label} accepted", flush=True)
        except Exception as exc:  # noqa: BLE001 - the class is the result
            print(f"{label} {type(exc).__name__}", flush=True)
    client.stop()


def fresh_vote(hosts: str, attempt: dict) -> None:
    client = connect(hosts, start=False)
    client.start(timeout=15)
    try:
        EpochLedger(client, "expiry", owner="zombie").vote(Attempt.from_dict(attempt), "out", "y", {"by": "zombie"})
    finally:
        client.stop()


if __name__ == "__main__":
    main(sys.argv[1])
