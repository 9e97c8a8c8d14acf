"""The main job on the production topology (issue 36), beside the same days under the LocalExecutor.

Starts the whole topology of ``scripts/cluster.sh`` (3-node ZooKeeper ensemble, Spark standalone
master, two workers and a Spark Connect server, PostgreSQL, Redis, Airflow with two schedulers, two
triggerers and two Celery workers; see tests/helpers/cluster_topology.py) and runs ``nycflights_daily``
and ``nycflights_report`` unchanged over the same days three times, one deployment after the other
on the same ensemble and Spark (each with its own ZooKeeper chroot, metadata database and data):

1. Celery, no fault (the Spark Connect server warmed first);
2. LocalExecutor (one scheduler and triggerer), no fault, the Celery deployment stopped: the peer;
3. Celery again, with the faults injected (a second deployment of the same DAG started mid-run,
   kill -9 of a Celery worker mid-Spark-task and of the ZooKeeper leader; the full run adds a
   scheduler, the triggerer holding the deferred triggers and a Spark worker mid-job), one worker's
   epoch jobs through ``spark-submit`` onto the standalone master.

So the speed rows compare two fault-free runs on the same Spark route, and the exactly-once rows come
from the run with faults (the clean runs' own figures are in the notes). Rows:

- ``cluster_days_exact``: days whose sealed figures equal one Spark computation / days run (1.0);
- ``cluster_duplicate_seals``: seals beyond one per (epoch, partition) and per epoch (0);
- ``cluster_report_runs_per_day``: days with exactly one successful report run / days run (1.0; a day run
  twice and a day not run both count against it, and are listed in the note);
- ``cluster_seal_to_downstream_s``: ``daily`` sealed -> the report run's first task started, p50,
  Celery (ours) vs LocalExecutor (peer), fault-free runs;
- ``cluster_epoch_s``: an epoch opened -> sealed, p50, Celery vs LocalExecutor, fault-free runs;
- ``cluster_fault_recovery_s_max``: the longest recovery among the faults (see tests/helpers/cluster_faults.py).

    python bench/cluster.py [--smoke] [--days N]   # alone; bench/run.py includes it (--only cluster)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import LoadAverage, compare, figure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))
from cluster_faults import ALL_FAULTS  # noqa: E402
from cluster_outcome import Outcome  # noqa: E402
from cluster_run import Driver, run_local  # noqa: E402
from cluster_supervisor import Supervisor  # noqa: E402
from cluster_topology import Cluster  # noqa: E402

GROUP = "cluster"
SMOKE_FAULTS = ("second-deployment", "celery-worker", "zookeeper-leader")
# The kill -9 faults: the takeover's recovery is the DAG's leadership lease (600 s) plus an epoch, a setting
# rather than a recovery (scripts/cluster.sh faults runs it)
FULL_FAULTS = tuple(f for f in ALL_FAULTS if f != "takeover")


def merged(own: dict[str, Any], first: Cluster, shared: dict[str, Any]) -> dict[str, Any]:
    """A deployment's state with the shared components (ZooKeeper members, Spark) of ``first``'s, as they
    run now (its supervisor restarts them), for the faults that kill those. ``first``'s Airflow is stopped."""
    from airflow_epochs.process_identity import identify

    shared_now = {name: pid for name, pid in first.components().items() if name not in own["components"]}
    identities = {name: found.to_json() for name, pid in shared_now.items() if (found := identify(pid)) is not None}
    return {**own, "zookeeper": shared["zookeeper"], "components": {**shared_now, **own["components"]},
            "identities": {**identities, **own["identities"]}}


def run_faults(base: Path, first: Cluster, shared: dict[str, Any], days: int,
               faults: tuple[str, ...]) -> tuple[Outcome, list[str]]:
    """The same days on a third deployment (Celery, worker 2 on spark-submit) with ``faults`` injected."""
    third = Cluster(base, days=days, deployment="faults", shared=shared, submit_workers=(2,))
    try:
        third.start()
        with Supervisor(third):
            driver = Driver(lambda: merged(third.state(), first, shared))
            try:
                return driver.run(faults, timeout=2400), driver.fault_errors
            finally:
                driver.close()
    finally:
        third.stop()


def speed_rows(celery: Outcome, local: Outcome, days: int, load: str) -> None:
    """The fault-free runs' rows, recorded as soon as both ran (a failure of the faults phase keeps them)."""
    compare("cluster_seal_to_downstream_s", GROUP, "daily sealed -> report's first task, p50, Celery vs Local "
            "(no fault)", list(celery.seal_to_downstream_s.values()), list(local.seal_to_downstream_s.values()),
            "s", "LocalExecutor, same days",
            note=f"{days} days each, same machine, ensemble and Spark Connect; {load}")
    compare("cluster_epoch_s", GROUP, "epoch opened -> sealed, p50, Celery vs Local (no fault)",
            list(celery.epoch_s.values()), list(local.epoch_s.values()), "s", "LocalExecutor, same days",
            note=f"{days} days each, same machine, ensemble and Spark Connect (warmed before both); "
            f"Celery {_each(celery.epoch_s)}, Local {_each(local.epoch_s)}; {load}")


def _each(values: dict[int, float]) -> str:
    return "/".join(f"{values[e]:.0f}" for e in sorted(values)) + " s"


def run_all(smoke: bool, days: int | None = None) -> tuple[Outcome, Outcome, Outcome]:
    days = days or (3 if smoke else 5)
    load = LoadAverage()
    with tempfile.TemporaryDirectory(prefix="epochs-bench-cluster-") as tmp:
        cluster = Cluster(Path(tmp) / "cluster", days=days)
        try:
            cluster.start()
            assert cluster.connect is not None
            warm = cluster.connect.healthy(timeout=300)  # Spark Connect's first job is slow: not an epoch's
            if not warm[0]:
                raise RuntimeError(f"Spark Connect did not answer: {warm[1]}")
            with Supervisor(cluster):  # restarts the ensemble's members and Spark's processes in every phase
                driver = Driver(cluster.state)
                try:
                    celery = driver.run(timeout=2400)
                finally:
                    driver.close()
                print(celery.markdown(), flush=True)  # each phase's figures as soon as it ends
                shared = cluster.state()  # the ensemble's and Spark's, for the next deployments
                # Celery's deployment stops: the LocalExecutor's gets the machine to itself, as Celery had.
                if cluster.stack is not None:
                    cluster.stack.stop()
                local = run_local(Path(tmp) / "local", shared, timeout=2400)
                print(local.markdown(), flush=True)
                speed_rows(celery, local, days, f"{load.summary()} so far")
                faulted, errors = run_faults(Path(tmp) / "faults", cluster, shared, days,
                                             SMOKE_FAULTS if smoke else FULL_FAULTS)
        finally:
            cluster.stop()
    load.stop()
    print(faulted.markdown())
    whole = load.summary()
    print(f"[cluster] {days} days a phase; {whole} over the whole benchmark", flush=True)
    clean = (f"fault-free runs: Celery {celery.days_exact:.2f} exact, {celery.duplicate_seals} duplicate seals, "
             f"{celery.report_runs_per_day:.2f} days reported once; LocalExecutor {local.days_exact:.2f}, "
             f"{local.duplicate_seals}, {local.report_runs_per_day:.2f}")
    note = f"{days} days with faults: {', '.join(f.name for f in faulted.faults)}" + \
        (f"; NOT injected: {errors}" if errors else "") + f"; {clean}; {whole}"
    figure("cluster_days_exact", GROUP, "days whose sealed figures equal one Spark computation / days (Celery, "
           "faults)", faulted.days_exact, "ratio", note)
    figure("cluster_duplicate_seals", GROUP, "seals beyond one per (epoch, partition) and per epoch (Celery, faults)",
           faulted.duplicate_seals, "seals", f"missing seals: {faulted.missing_seals}; {clean}")
    figure("cluster_report_runs_per_day", GROUP, "days with exactly one successful nycflights_report run / days "
           "(Celery, faults)", faulted.report_runs_per_day, "ratio",
           f"days with 0 or 2+ runs: {faulted.report_days_off or 'none'}; per epoch: "
           f"{dict(sorted(faulted.report_runs.items()))}")
    recoveries = [f.recovered_s for f in faulted.faults if f.recovered_s is not None]
    figure("cluster_fault_recovery_s_max", GROUP, "longest recovery of a fault (kill -9) during the run",
           max(recoveries) if recoveries else None, "s",
           "; ".join(f"{f.name}: {f.recovery() if f.recovered_s is None else round(f.recovered_s, 1)}"
                     for f in faulted.faults)
           + f"; spark-submit jobs: {len(faulted.spark_submit_jobs)}; {whole}")
    return celery, local, faulted


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--days", type=int, default=None, help="days in each phase (default 3 smoke, 5 full)")
    args = parser.parse_args()
    run_all(args.smoke, args.days)
