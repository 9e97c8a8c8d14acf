"""A correction's invalidation killed (SIGKILL, by itself) in the middle: run by test_reseal.

It advances the pipeline's unfinished corrections with the step that opens a stale seal's new version
wrapped: after the ``kill_after``-th such transaction committed, the process kills itself, so the
plan is written and only some of the stale seals are marked. The test then resumes from another client.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from zk_test_server import connect

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.recipes.corrections import invalidation


def main(hosts: str, pipeline: str, kill_after: str) -> None:
    client = connect(hosts, timeout=10)
    opened = [0]
    real = invalidation.open_derived

    def killed_after(*args: Any) -> bool:
        done = real(*args)
        if done:
            opened[0] += 1
            print(f"OPENED {opened[0]}", flush=True)
            if opened[0] >= int(kill_after):
                os.kill(os.getpid(), signal.SIGKILL)
        return done

    invalidation.open_derived = killed_after  # type: ignore[assignment]
    EpochLedger(client, pipeline, owner="worker").corrections.resume()
    print("NOT KILLED", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
