"""Barrier participants run in other processes (spawned pool workers, or a script to freeze)."""

from __future__ import annotations

import random
import sys
import time

from zk_test_server import connect

from airflow_epochs.coordination import EpochLedger


def arrive_and_wait(hosts: str, pipeline: str, epoch: int, name: str, participant: str, seed: int) -> dict:
    client = connect(hosts, start=False)
    client.start(timeout=30)
    try:
        barrier = EpochLedger(client, pipeline).barrier(epoch, name)
        time.sleep(random.Random(seed).uniform(0, 1.0))
        began = time.time()
        arrival = barrier.arrive(participant)
        outcome = barrier.wait(timeout=120)
        return {"participant": participant, "began": began, "passed": time.time(), "index": arrival.index,
                "decision": outcome.decision, "writes": barrier.session.stats["writes"]}
    finally:
        client.stop()


def main(hosts: str, pipeline: str, epoch: str, name: str, participant: str) -> None:
    """Arrive when a line comes on stdin (the test freezes this process before that)."""
    client = connect(hosts, start=False)
    client.start(timeout=30)
    barrier = EpochLedger(client, pipeline).barrier(int(epoch), name)
    print("READY", flush=True)
    sys.stdin.readline()
    arrival = barrier.arrive(participant)
    print(f"ARRIVED after_release={arrival.after_release} decision="
          f"{arrival.outcome.decision if arrival.outcome else None}", flush=True)
    client.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
