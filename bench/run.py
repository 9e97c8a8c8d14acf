"""Coordination benchmarks: each of our costs beside the peer a user would otherwise pick, same run.

    python bench/run.py                          # every group, full sizes (tens of minutes)
    python bench/run.py --smoke                  # tiny sizes, to keep the code working (CI)
    python bench/run.py --only sealing,open,growth
    python bench/run.py --only cluster --cluster-days 4   # the production topology over fewer days

Groups (row ids in brackets):
  wake       seal -> trigger wakes, vs poke sensors                      [wake_p50_ms, wake_vs_poke_*]
  cost       ZooKeeper requests and time per epoch; per delivered seal   [cost_requests_p*, cost_ms_p*,
                                                                          delivery_requests_per_seal]
  barrier    N participants through a barrier, vs kazoo's DoubleBarrier  [barrier_p50_n*, barrier_requests_n*, ...]
  sealing    epochs sealed per second, vs one global lock                [sealing_eps_p*]
  open       requests and time to open an epoch                          [open_requests, open_ms]
  growth     snapshot reads and znodes after many epochs                 [growth_snapshot_requests, growth_znodes]
  capacity   znodes, bytes, transactions per epoch; 10,000 pipelines;    [capacity_*]
             at rest / mid-epoch with the archive, the two fleets        [capacity_fleet_*]
  waiters    1,000 deferred waiters on one session vs a client each      [waiters_*]
  reconnect  1,000 waits re-armed after a leader failover (3 nodes)      [reconnect_*_n1000]
  spark      Spark epochs: warm Connect vs spark-submit; nycflights      [spark_epoch_s, spark_day_s]
  scheduler  seal -> downstream task under a real scheduler              [scheduler_sensor_s, scheduler_asset_s]
  ui         the Epochs page's first grid view on 10,000 epochs          [ui_grid_10k_ms]
  publish    a Spark epoch sealed and published to Iceberg vs sealed only [publish_overhead_epoch_s]
  producers  declared producers vs PartitionedAssetTimetable, real sched., [producers_duplicate_runs[S],
             per scenario S: plain, two_assets_one_key, rerun_after_consumption, producers_missed_keys[S],
             two_schedulers                                                producers_latency_s[S],
                                                                           producers_latency_{event,queue,start}_s[S],
                                                                           producers_seal_to_event_s[S],
                                                                           producers_seal_to_yield_s[S],
                                                                           producers_yield_to_event_s[S]]
  deadlines  60 epochs, seeded producer durations, a known delayed set:  [deadline_alert_latency_s_p50/max,
             alerts after predicted deadlines; prediction error vs the   deadline_false_alerts, deadline_missed_alerts,
             mean of recent runs; reads of one prediction; 100 watches   predicted_seal_error_pct, predict_requests_*,
             of one deadline on one session vs a thread per watch        deadline_100_watches_alert_latency_s_p50/max]
  reseal     correct one input at epoch 8 of 20: re-seal vs rollback    [reseal_rerun_seals, reseal_seconds]
  mainjob    the main job (nycflights, 3 / 30 days) under one real       [mainjob_catchup_epoch_s[P],
             scheduler vs P = airflow (depends_on_past, max_active_runs=1,  mainjob_seal_to_downstream_s[P],
             ExternalTaskSensor) and dagster (daily partitions, backfill    mainjob_path_{spark,coordination,
             by its daemon), same Spark jobs                                orchestration}_s[P],
                                                                           mainjob_peak_memory_mb[P],
                                                                           mainjob_days_exact[side],
                                                                           mainjob_zk_requests_per_epoch]
  cluster    the main job on Celery, 2 schedulers/triggerers, a ZooKeeper [cluster_days_exact, cluster_*_s,
             ensemble and a Spark cluster, faults; vs LocalExecutor        cluster_duplicate_seals, ...]

Prints one table (ours, peer, how many times better ours is) and writes it as JSON, rewritten after
each group (so the rows of the groups done so far are kept whatever happens later). A group that
raises is reported as failed, with its error, under ``failed`` in the JSON; the other groups still
run, and the exit status is 1. Every number comes from this run; the fairness rules are in
``bench/common.py``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the groups' modules sit beside this script

from common import ROWS, fmt, write_json

from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

GROUPS = ("wake", "cost", "barrier", "sealing", "open", "growth", "capacity", "waiters", "reconnect", "ui",
          "spark", "scheduler", "publish",
          "producers", "deadlines", "reseal", "mainjob", "cluster")

# Every group's module, imported before any group runs (also those not asked for): a module that imports
# only on pytest's path fails the run at once, not after the groups before it.
GROUP_MODULES = ("wake", "state_growth", "delivery_cost", "barrier", "sealing", "fleet_capacity", "many_waiters",
                 "reconnect", "ui_grid", "spark_epochs", "scheduler_latency", "publish", "producers", "deadlines",
                 "reseal", "mainjob", "mainjob_dagster")

FAIL_GROUP_ENV = "EPOCHS_BENCH_FAIL_GROUP"
"""A group named here raises instead of running: how the tests check that the others' rows are kept."""


def plan(server: EmbeddedZooKeeper, smoke: bool, cluster_days: int | None = None,
         mainjob_days: int | None = None, mainjob_sides: tuple[str, ...] | None = None,
         mainjob_scenario: str = "catchup", mainjob_stages: str = "tasks") -> dict[str, Callable[[], None]]:
    import barrier
    import deadlines
    import delivery_cost
    import many_waiters
    import reconnect
    import sealing
    import state_growth
    import wake

    hosts, port = server.hosts, server.port

    def spark() -> None:
        from spark_epochs import run_all

        run_all(hosts, smoke)

    def ui() -> None:
        from ui_grid import run_all

        run_all(hosts, smoke)

    def capacity() -> None:
        from fleet_capacity import run as fleet

        shapes = ((1, 1), (2, 2), (3, 2)) if smoke else ((1, 1), (4, 4), (10, 10), (10, 1))
        state_growth.capacity(hosts, shapes, 3 if smoke else 10)
        # one more shape with several producers for the fleets' fit (the real run's 10 x 3 is not among them)
        fleet(hosts, (*shapes, (2, 3) if smoke else (5, 2)), 3 if smoke else 10,
              (4, 10, 3, 4) if smoke else (200, 10, 3, 20))

    def publish() -> None:
        from publish import run_all

        run_all(hosts, smoke)

    def scheduler() -> None:
        from scheduler_latency import measure

        measure(hosts, 1 if smoke else 3, smoke)

    def producers() -> None:
        from producers import measure as measure_producers

        measure_producers(hosts, 2 if smoke else 3, smoke)

    def reseal() -> None:
        from reseal import run as run_reseal

        run_reseal(hosts, 20, 2 if smoke else 5)

    def mainjob() -> None:
        from mainjob import SIDES
        from mainjob import run_all as run_mainjob

        run_mainjob(hosts, port, server.pid, smoke, mainjob_days, mainjob_sides or SIDES, scenario=mainjob_scenario,
                    stages=mainjob_stages)

    def cluster() -> None:  # the whole production topology of its own (its ZooKeeper ensemble too)
        from cluster import run_all as run_cluster

        run_cluster(smoke, cluster_days)

    return {
        "wake": lambda: wake.run(hosts, 5 if smoke else 50, [(5.0, 1)] if smoke else [(60.0, 5), (5.0, 5)]),
        "cost": lambda: (state_growth.epoch_cost(hosts, (2,) if smoke else (1, 8), 3 if smoke else 30),
                         delivery_cost.run(hosts, 5 if smoke else 100)),
        "barrier": lambda: barrier.run(hosts, port, (10,) if smoke else (10, 100, 1000), 2 if smoke else 5),
        "sealing": lambda: sealing.run(hosts, (1, 4) if smoke else (1, 2, 4, 8, 16, 32, 64), 2 if smoke else 10,
                                       2 if smoke else 5, server_pid=server.pid),
        "open": lambda: state_growth.open_cost(hosts, 5 if smoke else 50),
        "growth": lambda: state_growth.growth(hosts, 120 if smoke else 2000, 60 if smoke else 200,
                                              30 if smoke else 100),
        "capacity": capacity,
        "waiters": lambda: many_waiters.run_all(hosts, port, smoke),
        "reconnect": lambda: reconnect.run_all(smoke),
        "ui": ui,
        "spark": spark,
        "scheduler": scheduler,
        "publish": publish,
        "producers": producers,
        "deadlines": lambda: deadlines.run(hosts, 12 if smoke else 60),
        "reseal": reseal,
        "mainjob": mainjob,
        "cluster": cluster,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--only", default="", help=f"comma-separated groups: {','.join(GROUPS)}")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results.json"))
    parser.add_argument("--mainjob-days", type=int, default=None,
                        help="mainjob: the days each side catches up (default 3 with --smoke, else 30)")
    parser.add_argument("--mainjob-sides", default=None,
                        help="mainjob: the sides, in the order they run (default ours,airflow,dagster; "
                             "dagster,airflow,ours tells how much of a gap is the order)")
    parser.add_argument("--mainjob-scenario", choices=("catchup", "kill", "two"), default="catchup",
                        help="mainjob: catchup (timing rows and the correction), kill (day 2's daily job killed -9 "
                             "mid-job) or two (two deployments enabled at once on the same days): correctness rows")
    parser.add_argument("--mainjob-stages", choices=("tasks", "inline"), default="tasks",
                        help="mainjob: ours' epoch stages as tasks of their own (the DAG's default) or inside its "
                             "jobs' tasks (EpochGroup(inline_stages=True)); the inline form's rows end in @inline")
    parser.add_argument("--cluster-days", type=int, default=None,
                        help="cluster: the days the main job runs in each phase (default 3 with --smoke, else 5)")
    args = parser.parse_args()
    if args.cluster_days is not None and not 2 <= args.cluster_days <= 30:
        parser.error(f"--cluster-days must be between 2 and 30, not {args.cluster_days}")
    wanted = [g.strip() for g in args.only.split(",") if g.strip()] or list(GROUPS)
    unknown = sorted(set(wanted) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    import importlib
    import logging

    for module in GROUP_MODULES:
        importlib.import_module(module)
    for noisy in ("kazoo", "airflow_epochs.kazoo", "airflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import kazoo
    import pyspark

    machine = {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
               "kazoo": getattr(kazoo, "__version__", "?"), "pyspark": pyspark.__version__,
               "mode": "smoke" if args.smoke else "full", "groups": wanted}
    print(f"machine: {machine}", flush=True)
    took: dict[str, float] = {}
    failed: dict[str, str] = {}
    out = Path(args.out)

    def save() -> None:
        # after every group: a later group that fails, or a run stopped by hand, loses no figure
        # "date": when this save happened, so the last one says when the run finished (the performance page shows it)
        write_json(out, {"machine": machine, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "seconds": took, "failed": failed,
                         "done": [g for g in wanted if g in took and g not in failed],
                         "rows": [r.to_json() for r in ROWS]})

    save()  # a JSON left by an earlier run is not mistaken for this one's
    planted = os.environ.get(FAIL_GROUP_ENV, "")  # the tests' way to make one group fail
    # No per-address connection limit: the many-waiters peer opens one session per waiter.
    with EmbeddedZooKeeper(max_client_connections=0) as server:
        sides = tuple(s.strip() for s in args.mainjob_sides.split(",")) if args.mainjob_sides else None
        groups = plan(server, args.smoke, args.cluster_days, args.mainjob_days, sides, args.mainjob_scenario,
                      args.mainjob_stages)
        for name in wanted:
            print(f"== {name}", flush=True)
            started = time.monotonic()
            try:
                if name == planted:
                    raise RuntimeError(f"group {name} made to fail by {FAIL_GROUP_ENV}")
                groups[name]()
            except KeyboardInterrupt:  # stopped by hand: the rows this group recorded so far are kept
                failed[name] = "stopped by hand (SIGINT) before the group finished"
                took[name] = round(time.monotonic() - started, 1)
                save()
                raise
            except Exception as error:  # noqa: BLE001 - any group's failure is reported, the others still run
                traceback.print_exc()
                failed[name] = f"{type(error).__name__}: {error}"
                print(f"== {name} FAILED: {failed[name]}", flush=True)
            took[name] = round(time.monotonic() - started, 1)
            save()
    print()
    print(f"{'id':<30} {'measure':<62} {'ours':>10} {'peer':>10} {'x better':>8}  unit / peer / note")
    for row in ROWS:
        adv = row.advantage
        print(f"{row.id:<30} {row.measure[:62]:<62} {fmt(row.ours):>10} {fmt(row.peer):>10} "
              f"{(f'{adv:.2f}' if adv else '-'):>8}  {row.unit} / {row.peer_name} / {row.note}")
    print(f"\nwritten to {out}")
    if failed:
        for name, error in failed.items():
            print(f"group {name} FAILED: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
