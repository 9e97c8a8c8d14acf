"""One run of the ``nycflights_correct`` DAG (``dag.test``, tasks in this process) for the system tests of
a correction killed in the middle and of two corrections requested at once.

Usage: ``python correct_worker.py DAGS_FOLDER LOGICAL_DATE CONF_JSON MARKERS NAME [HOLD_AT]``
(the Airflow home, its database, connections and Variables come from the environment).

``HOLD_AT`` names a deterministic point where the run stops and waits, after writing
``MARKERS/held-NAME`` (JSON: where it holds), until ``MARKERS/release`` exists (or forever, for a test
that kills it there with SIGKILL):

- ``vote:N``: the N-th vote under a version (``ledger.corrections.vote_version``), before it is sent: the
  Spark job of that seal has written its run, its vote is not cast;
- ``publish``: the publish of the corrected partition into the table, before it starts (every planned
  seal re-sealed).

Before starting the run the worker writes ``MARKERS/ready-NAME`` and waits for ``MARKERS/go``, so that
several workers start their runs together. The last line printed is JSON: the run's state.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def _hold(markers: Path, name: str, where: dict[str, Any]) -> None:
    (markers / f"held-{name}").write_text(json.dumps(where))
    while not (markers / "release").exists():
        time.sleep(0.05)


def main(dags: str, logical_date: str, conf: str, markers_dir: str, name: str, hold_at: str = "") -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_epochs.coordination.recipes.corrections import Corrections
    from airflow_epochs.tables import tasks

    markers = Path(markers_dir)
    if hold_at.startswith("vote:"):
        real_vote = Corrections.vote_version
        votes = [0]
        at = int(hold_at.split(":", 1)[1])

        def vote_version(self: Corrections, epoch: int, partition: str, version: int, *args: Any,
                         **kwargs: Any) -> Any:
            votes[0] += 1
            if votes[0] == at:
                _hold(markers, name, {"epoch": epoch, "partition": partition, "version": version})
            return real_vote(self, epoch, partition, version, *args, **kwargs)

        Corrections.vote_version = vote_version  # type: ignore[method-assign]
    elif hold_at == "publish":
        real_publish = tasks.publish_from_task

        def publish_from_task(*args: Any, **kwargs: Any) -> Any:
            _hold(markers, name, {"publish": True})
            return real_publish(*args, **kwargs)

        tasks.publish_from_task = publish_from_task  # type: ignore[assignment]
    elif hold_at:
        raise SystemExit(f"unknown hold point {hold_at!r}")

    dag = DagBag(dag_folder=dags).get_dag("nycflights_correct")
    (markers / f"ready-{name}").touch()
    deadline = time.monotonic() + 300
    while not (markers / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go")
        time.sleep(0.01)
    when = datetime.fromisoformat(logical_date)  # run_after too: the same run id, so a rerun is the same DAG run
    run = dag.test(run_after=when, logical_date=when, run_conf=json.loads(conf))
    print(json.dumps({"name": name, "state": str(run.state).rsplit(".", 1)[-1].lower()}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
