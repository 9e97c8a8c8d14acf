"""The main job on the production topology, on this machine's loopback (see ``scripts/cluster.sh``).

    cluster.py up [--days N] [--connect-only]
                                 start everything and supervise it (foreground; cluster.sh runs it detached)
    cluster.py run [--faults] [--no-compare]
                                 run the days under the schedulers, check, report (and the same days
                                 under the LocalExecutor beside it)
    cluster.py faults            inject the faults into a run in progress (another terminal's ``run``)
    cluster.py status            each component, the frontier, the ZooKeeper leader
    cluster.py down              stop everything

State lives in ``.epochs/cluster`` (0700): one folder a component, ``state-celery.json`` (0600: pids,
ports and the deployment's Airflow settings, secrets included) and the reports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # the launcher the system test uses too


def say(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


def read_state(base: Path) -> dict[str, Any]:
    from airflow_epochs.private_files import read_private

    try:
        return dict(json.loads(read_private(base / "state-celery.json", secret=True)))
    except FileNotFoundError:
        raise SystemExit(f"[cluster] no cluster is up in {base} (bash scripts/cluster.sh up)") from None


def ours(pid: int) -> bool:
    """Whether ``pid`` runs this script (a recorded pid may have been reused by another process)."""
    try:
        return Path(__file__).name.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def up(base: Path, days: int, connect_only: bool) -> int:
    from cluster_topology import Cluster

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    from airflow_epochs.private_files import check_private_dir

    if os.path.lexists(base):  # every up starts from nothing: a new metadata database, ensemble and data
        check_private_dir(base)
        for entry in base.iterdir():
            if entry.name != "supervisor.log":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    # worker 2's epoch jobs go through spark-submit onto the standalone master, worker 1's through Connect
    cluster = Cluster(base, days=days, submit_workers=() if connect_only else (2,))
    try:
        cluster.start()
        cluster.write_state()
        say(f"up: Airflow at {cluster.state()['api']}, state in {base}; this process supervises it "
            "(restarts what a process supervisor would)")
        while not stopping:
            time.sleep(2)
            for name in cluster.supervise_once():
                say(f"supervisor: {name} had died: restarted it, as a process supervisor (systemd) would")
            cluster.write_state()
    finally:
        say("stopping every component")
        cluster.stop()
        say("down")
    return 0


def run(base: Path, faults: bool, compare: bool, timeout: float) -> int:
    from cluster_faults import ALL_FAULTS
    from cluster_run import Driver, run_local

    driver = Driver(lambda: read_state(base))
    try:
        outcome = driver.run(ALL_FAULTS if faults else (), timeout=timeout)
    finally:
        driver.close()
    report = outcome.markdown()
    for problem in driver.fault_errors:
        report += f"\n- fault not injected: {problem}\n"
    if compare:
        say("the same days under the LocalExecutor (its own chroot, database and data), for comparison")
        local = run_local(base / "local", read_state(base), timeout)
        report += "\n## The same days under the LocalExecutor (same ensemble and Spark)\n\n" + local.markdown()
    (base / "run-report.md").write_text(report)
    print(report)
    say(f"report: {base / 'run-report.md'}")
    good = outcome.days_exact == 1.0 and outcome.duplicate_seals == 0 and outcome.one_report_run_per_day
    return 0 if good and not driver.fault_errors else 1


def faults(base: Path) -> int:
    from cluster_faults import ALL_FAULTS
    from cluster_outcome import days_not_reported_once
    from cluster_run import Driver

    driver = Driver(lambda: read_state(base))
    try:
        driver.inject(ALL_FAULTS)
        if driver.second_start is not None:  # the second deployment lives as long as this command: to the end
            say("waiting for the run to finish, then for the second deployment's runs to settle")
            driver.second_start.join(1800)
            try:
                driver.wait_done(time.monotonic() + 3600)
                driver.second_settled(time.monotonic() + 600)
                runs = driver.report_runs()
                say(f"report runs per day across both deployments: {dict(sorted(runs.items()))}")
                off = days_not_reported_once(runs, driver.days)
                if off:  # a day run twice and a day not run: neither hides behind a total
                    driver.fault_errors.append(f"not exactly one report run per day: {off} (day: runs)")
            except Exception as exc:  # noqa: BLE001 - the faults' report below is printed all the same
                driver.fault_errors.append(f"after the faults: {type(exc).__name__}: {exc}")
    finally:
        if driver.second is not None:
            driver.second.stop()
        driver.close()
    from cluster_outcome import faults_markdown

    for fault in driver.faults:
        made_of = f" ({fault.made_of()})" if fault.parts else ""
        restarted = f"; restarted: {fault.restarted}" if fault.restarted else ""
        say(f"{fault.name}: {fault.killed} ({fault.detail}): {fault.recovery()}{made_of}{restarted}")
    report = "# The faults injected into a run on the cluster\n\n" + faults_markdown(driver.faults)
    report += "".join(f"\n- not as planned: {problem}\n" for problem in driver.fault_errors)
    (base / "faults-report.md").write_text(report)
    print(report)
    say(f"report: {base / 'faults-report.md'}")
    return 1 if driver.fault_errors else 0


def status(base: Path) -> int:
    from cluster_run import Driver

    state = read_state(base)
    supervisor = int(state["supervisor"])
    say(f"supervisor pid {supervisor}: {'running' if ours(supervisor) else 'GONE'}")
    for name, pid in sorted(state["components"].items()):
        alive = Path(f"/proc/{pid}").exists()
        say(f"  {name:<18} pid {pid:<8} {'running' if alive else 'dead'}")
    driver = Driver(lambda: read_state(base))
    try:
        say(f"ZooKeeper leader: member {driver.zookeeper_leader()}; frontier {driver.frontier()}/{state['days']}; "
            f"report runs {sum(driver.report_runs().values())}")
    finally:
        driver.close()
    say(f"Airflow: {state['api']}; logs in {state['logs']}")
    return 0


def down(base: Path) -> int:
    state = read_state(base)
    supervisor = int(state["supervisor"])
    supervised = ours(supervisor)
    if supervised:
        os.kill(supervisor, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while ours(supervisor) and time.monotonic() < deadline:
            time.sleep(0.5)
    if ours(supervisor):
        say(f"the supervisor (pid {supervisor}) did not stop")
        return 1
    if not supervised:  # a supervisor killed -9 left its components: each checked, then its group stopped
        from airflow_epochs.process_identity import NotOurProcess, ProcessIdentity, stop_verified

        for name, recorded in state["identities"].items():
            try:
                if stop_verified(ProcessIdentity.from_json(recorded), group=True):
                    say(f"stopped {name} (left by a supervisor that died)")
            except NotOurProcess as exc:
                say(f"{name}: {exc}")
    with contextlib.suppress(FileNotFoundError):
        (base / "state-celery.json").unlink()
    say("down")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "run", "faults", "status", "down"))
    parser.add_argument("--days", type=int, default=3, help="up: the days (epochs) the catch-up covers (default 3)")
    parser.add_argument("--connect-only", action="store_true",
                        help="up: every Celery worker's epoch jobs through Spark Connect (default: worker 2's "
                        "through spark-submit onto the standalone master)")
    parser.add_argument("--faults", action="store_true", help="run: inject every fault during the run")
    parser.add_argument("--no-compare", action="store_true", help="run: skip the LocalExecutor comparison")
    parser.add_argument("--timeout", type=float, default=1800, help="run: give up after this many seconds")
    parser.add_argument("--base", default=str(ROOT / ".epochs" / "cluster"), help="the state folder")
    args = parser.parse_args()
    if not 1 <= args.days <= 365:
        parser.error(f"--days must be between 1 and 365, not {args.days}")
    base = Path(args.base).absolute()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.command == "up":
        return up(base, args.days, args.connect_only)
    if args.command == "run":
        return run(base, args.faults, not args.no_compare, args.timeout)
    return {"faults": faults, "status": status, "down": down}[args.command](base)


if __name__ == "__main__":
    sys.exit(main())
