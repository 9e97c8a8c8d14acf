"""A deadline watcher in a process of its own, for the one-alert-across-processes test.

Usage: ``deadline_worker.py HOSTS PIPELINE EPOCH PARTITION MODE`` (HOSTS: ``zk_server.address + chroot``,
run with ``env=zk_server.env()``). It checks the partition until its
deadline has passed, then prints one JSON line: ``state``, whether it holds the alert's delivery
(``deliver``) and whether it delivered it (``delivered``). MODE ``deliver`` delivers at once; MODE
``hang`` holds the delivery without delivering, until killed. A watcher that does not hold it waits
(the holder delivers, or dies and this one takes over) and prints a second line.
"""

from __future__ import annotations

import json
import os
import sys
import time

from zk_test_server import connect

from airflow_epochs.coordination import EpochLedger


def main(hosts: str, pipeline: str, epoch: int, partition: str, mode: str) -> None:
    client = connect(hosts, timeout=2.0)  # the tests' secured server, found through $AIRFLOW_EPOCHS_HOME
    deadlines = EpochLedger(client, pipeline, owner=f"worker-{os.getpid()}").deadlines()
    verdict = deadlines.check(epoch, partition)
    while verdict.state == "waiting":
        time.sleep(max(0.01, (verdict.deadline_at or 0.0) - time.time()))
        verdict = deadlines.check(epoch, partition)
    delivered = False
    if verdict.deliver and mode == "deliver":
        deadlines.delivered(verdict.alert)  # type: ignore[arg-type]
        delivered = True
    print(json.dumps({"state": verdict.state, "deliver": verdict.deliver, "delivered": delivered}), flush=True)
    if verdict.deliver and mode == "hang":
        time.sleep(3600)
    if not verdict.deliver:
        later = deadlines.wait(epoch, partition, timeout=60)
        if later.deliver:
            deadlines.delivered(later.alert)  # type: ignore[arg-type]
        done = later.deliver or (later.alert is not None and later.alert.delivered_at is not None)
        print(json.dumps({"state": later.state, "deliver": later.deliver, "delivered": done}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
