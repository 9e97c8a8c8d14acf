"""A publishing process the crash tests kill with SIGKILL at a named step.

Usage: python publish_worker.py HOSTS PIPELINE TABLE PARTITION EPOCH KILL_AT  (catalog settings as JSON
on stdin, the secret included: never on the command line).
"""

from __future__ import annotations

import json
import os
import signal
import sys

from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.tables import CatalogSettings, load_catalog, publish_sealed


def main() -> None:
    hosts, pipeline, table, partition, epoch, kill_at = sys.argv[1:7]
    raw = json.loads(sys.stdin.read())
    settings = CatalogSettings(raw["name"], raw["kind"], raw["properties"], raw["secret"])

    def on_step(step: str) -> None:
        print(f"step {step}", flush=True)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    zk = KazooClient(hosts=hosts)
    zk.start(timeout=15)
    outcome = publish_sealed(EpochLedger(zk, pipeline), load_catalog(settings), table, partition, int(epoch),
                             on_step=on_step)
    print(json.dumps(outcome.to_dict()), flush=True)
    zk.stop()


if __name__ == "__main__":
    main()
