"""A compaction that is killed (SIGKILL, by itself) between the archive write and the ZooKeeper delete.

Run by test_archive: it compacts the pipeline with the deletion step replaced by ``kill -9`` of this
process, so the epochs' archive files are written and their znodes are all still in ZooKeeper. With
``retire`` (test_retired_partitions), the epochs are compacted as usual and the process kills itself
right after writing the first removed partition's retirement file, before ZooKeeper deletes it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from zk_test_server import connect

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.coordination.protocol import retention
from airflow_epochs.coordination.state import retired_partitions


def main(hosts: str, pipeline: str, step: str = "epochs") -> None:
    client = connect(hosts, start=False, timeout=10)
    client.start(timeout=15)
    if step == "retire":
        write = retired_partitions.write_or_verify

        def killed_after_writing(*args: Any) -> None:
            write(*args)
            print("ARCHIVED", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        retired_partitions.write_or_verify = killed_after_writing  # type: ignore[assignment]
        EpochLedger(client, pipeline, owner="compactor").compact()
        print("NOT KILLED", flush=True)
        return

    def killed_before_deleting(_call: Any, _top: str, _known: Any = None) -> int:
        print("ARCHIVED", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        return 0  # never reached

    retention.delete_tree = killed_before_deleting  # type: ignore[assignment]
    EpochLedger(client, pipeline, owner="compactor").compact()
    print("NOT KILLED", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
