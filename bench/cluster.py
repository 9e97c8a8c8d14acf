"""The main job on the production topology (issue 36), beside the same days under the LocalExecutor.

Starts the whole topology of ``scripts/cluster.sh`` (3-node ZooKeeper ensemble, Spark standalone
master, two workers and a Spark Connect server, PostgreSQL, Redis, Airflow with two schedulers, two
triggerers and two Celery workers; see tests/helpers/cluster_topology.py), runs ``nycflights_daily``
and ``nycflights_report`` unchanged over the days with faults injected, checks them, then runs the
same days on a LocalExecutor deployment on the same ensemble and Spark (its own chroot, database
and data). Rows:

- ``cluster_days_exact``: days whose sealed figures equal one Spark computation / days run (1.0);
- ``cluster_duplicate_seals``: seals beyond one per (epoch, partition) and per epoch (0);
- ``cluster_report_runs_per_day``: successful report runs / days (1.0, and one for each day);
- ``cluster_seal_to_downstream_s``: ``daily`` sealed -> the report run's first task started, p50,
  Celery (ours) vs LocalExecutor (peer);
- ``cluster_epoch_s``: an epoch opened -> sealed, p50, Celery vs LocalExecutor;
- ``cluster_fault_recovery_s_max``: the longest recovery among the faults (see tests/helpers/cluster_run.py).

    python bench/cluster.py [--smoke]      # alone; bench/run.py includes it (--only cluster)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import compare, figure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))
from cluster_outcome import Outcome  # noqa: E402
from cluster_run import ALL_FAULTS, Driver, run_local  # noqa: E402
from cluster_topology import Cluster, Supervisor  # noqa: E402

GROUP = "cluster"
SMOKE_FAULTS = ("celery-worker", "zookeeper-leader")


def run_all(smoke: bool) -> tuple[Outcome, Outcome]:
    days = 3 if smoke else 5
    with tempfile.TemporaryDirectory(prefix="epochs-bench-cluster-") as tmp:
        cluster = Cluster(Path(tmp) / "cluster", days=days)
        try:
            cluster.start()
            with Supervisor(cluster):
                driver = Driver(cluster.state)
                try:
                    celery = driver.run(SMOKE_FAULTS if smoke else ALL_FAULTS, timeout=1800)
                finally:
                    driver.close()
            errors = driver.fault_errors
            # Celery's deployment stops first: the LocalExecutor's gets the machine to itself too.
            if cluster.stack is not None:
                cluster.stack.stop()
            local = run_local(Path(tmp) / "local", cluster.state(), timeout=1800)
        finally:
            cluster.stop()
    print(celery.markdown())
    print(local.markdown())
    note = f"{days} days, faults: {', '.join(f.name for f in celery.faults)}" + \
        (f"; NOT injected: {errors}" if errors else "")
    figure("cluster_days_exact", GROUP, "days whose sealed figures equal one Spark computation / days (Celery)",
           celery.days_exact, "ratio", note)
    figure("cluster_duplicate_seals", GROUP, "seals beyond one per (epoch, partition) and per epoch (Celery)",
           celery.duplicate_seals, "seals", f"missing seals: {celery.missing_seals}")
    figure("cluster_report_runs_per_day", GROUP, "successful nycflights_report runs per day (Celery)",
           celery.report_runs_per_day, "runs/day", f"per epoch: {dict(sorted(celery.report_runs.items()))}")
    compare("cluster_seal_to_downstream_s", GROUP, "daily sealed -> report's first task, p50, Celery vs Local",
            list(celery.seal_to_downstream_s.values()), list(local.seal_to_downstream_s.values()), "s",
            "LocalExecutor, same days")
    compare("cluster_epoch_s", GROUP, "epoch opened -> sealed, p50, Celery (with faults) vs Local",
            list(celery.epoch_s.values()), list(local.epoch_s.values()), "s", "LocalExecutor, same days")
    recoveries = [f.recovered_s for f in celery.faults if f.recovered_s is not None]
    figure("cluster_fault_recovery_s_max", GROUP, "longest recovery of a fault (kill -9) during the run",
           max(recoveries) if recoveries else None, "s",
           "; ".join(f"{f.name}: {f.recovered_s if f.recovered_s is None else round(f.recovered_s, 1)}"
                     for f in celery.faults))
    return celery, local


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    run_all(parser.parse_args().smoke)
