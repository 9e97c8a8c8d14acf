"""The faults :class:`cluster_run.Driver` injects into a run on the cluster, each with its recovery
time: kill -9 of a Celery worker mid-Spark-task, a scheduler, the triggerer holding the deferred
triggers, the ZooKeeper leader, a Spark worker mid-job; and a second deployment of the same DAG
started mid-run."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_outcome import Fault, takeover_parts

from airflow_epochs.servers.zookeeper_runtime import four_letter_word

PIPELINE, DAG_ID, REPORT_DAG = "nycflights", "nycflights_daily", "nycflights_report"
# the Spark epoch tasks (in the DAG's EpochGroup "epoch") and the partition each one seals
SPARK_TASKS = {"epoch.clean_flights": "flights", "epoch.hourly_weather": "weather", "epoch.join": "daily"}
ORIGIN = datetime.datetime(2013, 1, 1, tzinfo=datetime.timezone.utc)
ALL_FAULTS = ("celery-worker", "second-deployment", "zookeeper-leader", "scheduler", "triggerer", "spark-worker",
              "takeover")
# What ``systemctl stop`` left stopped: the names the cluster's supervisor does not restart (0600, in its base).
HELD_FILE = "held.json"
SECOND = "second"  # the second deployment's name, its AIRFLOW_EPOCHS_DEPLOYMENT (the lease's owner)


def say(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


class Faults:
    """The fault injections of :class:`cluster_run.Driver` (which provides ``query``, ``refresh``,
    ``history``, ``airflow``, ``state``, ``client``, ``finished``, ``faults`` and ``fault_errors``)."""

    def inject(self, faults: tuple[str, ...]) -> None:
        for name in faults:
            before = len(self.faults)
            try:
                getattr(self, "fault_" + name.replace("-", "_"))()
            except Exception as exc:  # noqa: BLE001 - reported with the run's figures, never silent
                self.fault_errors.append(f"{name}: {type(exc).__name__}: {exc}")
                injected = [f for f in self.faults[before:] if f.recovered_s is None and f.awaited]
                for fault in injected:  # injected, then its recovery's wait failed
                    fault.failure = f"{type(exc).__name__}: {exc}"
                say(f"fault {name}: {'did not recover' if injected else 'could not be injected'}: {exc}")

    def kill(self, name: str) -> int:
        """kill -9 every process of component ``name``'s session (each component leads its own; a Celery
        worker's task processes have process groups of their own in it): its host crashed. Done once its
        pid is checked to be the process that was started (a pid read from the state may have been reused)."""
        from airflow_epochs.process_identity import NotOurProcess, ProcessIdentity

        state = self.refresh()
        pid = int(state["components"][name])
        recorded = state["identities"].get(name)
        if recorded is None or not ProcessIdentity.from_json(recorded).alive():
            raise NotOurProcess(f"{name} (pid {pid}) is not the process the cluster started; not killing it")
        for member in _session(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        return pid

    def components(self) -> dict[str, int]:
        return dict(self.refresh()["components"])

    def running_spark_task(self, min_seconds: float = 3.0, timeout: float = 600) -> tuple[int, str, int]:
        """(epoch, task id, pid) of a Spark epoch task running for ``min_seconds`` at least."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.finished.is_set():
            rows = self.query("SELECT r.logical_date, ti.task_id, ti.pid FROM task_instance ti JOIN dag_run r ON "
                              "r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND ti.state = "
                              "'running' AND ti.task_id = ANY(%s) AND ti.pid IS NOT NULL AND ti.start_date < "
                              "now() - make_interval(secs => %s)", DAG_ID, list(SPARK_TASKS), min_seconds)
            for logical, task, pid in rows:
                return (logical - ORIGIN).days + 1, str(task), int(pid)
            time.sleep(0.5)
        raise TimeoutError("no Spark epoch task ran while the fault waited (too few days for every fault?)")

    def wait_sealed(self, epoch: int, partition: str, since: float, timeout: float = 600) -> float:
        """Seconds from ``since`` (wall clock) to the seal of (epoch, partition)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.history():
                if event.event == "partition_sealed" and event.detail.get("epoch") == epoch and \
                        event.detail.get("partition") == partition:
                    return max(0.0, event.at - since)
            time.sleep(1)
        raise TimeoutError(f"({epoch}, {partition}) not sealed within {timeout:.0f} s")

    def supervisor_note(self, name: str, since: float) -> str:
        return f"{name}, by the cluster's supervisor (as systemd would)"

    def fault_celery_worker(self) -> None:
        """kill -9 the Celery worker running a Spark epoch task; recovered: that partition sealed."""
        epoch, task, pid = self.running_spark_task()
        lineage = _ancestors(pid)  # the task process runs in a session of its own, under the worker's tree
        worker = next((n for n, p in self.components().items() if p in lineage and n.startswith("celery-worker")),
                      None)
        if worker is None:
            raise RuntimeError(f"task {task} (pid {pid}) runs in no Celery worker's process group")
        fault = Fault("celery worker killed mid-Spark-task", worker, time.time(), f"epoch {epoch} {task}")
        self.kill(worker)
        say(f"fault: kill -9 {worker} while it runs {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(worker, fault.at)
        fault.recovered_s = self.wait_sealed(epoch, SPARK_TASKS[task], fault.at)
        say(f"fault: ({epoch}, {SPARK_TASKS[task]}) sealed {fault.recovered_s:.1f} s after the kill")

    def zookeeper_leader(self) -> int | None:
        files = {k: self.state["zookeeper"].get(k) for k in ("ca", "certfile", "keyfile")}
        for member in self.state["zookeeper"]["members"]:
            if "Mode: leader" in four_letter_word(member["port"], timeout=2.0, **files):
                return int(member["myid"])
        return None

    def fault_zookeeper_leader(self) -> None:
        """kill -9 the ensemble's leader during a Spark task; recovered: a write commits again."""
        epoch, task, _ = self.running_spark_task(min_seconds=1.0)
        leader = self.zookeeper_leader()
        if leader is None:
            raise RuntimeError("no ZooKeeper leader")
        fault = Fault("ZooKeeper leader killed", f"zookeeper-{leader}", time.time(), f"during epoch {epoch} {task}")
        self.kill(f"zookeeper-{leader}")
        say(f"fault: kill -9 the ZooKeeper leader (member {leader}) during {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(f"zookeeper-{leader}", fault.at)
        probe, deadline = "/cluster-probe", time.monotonic() + 600
        while True:
            try:
                self.client.ensure_path(probe)
                self.client.set(probe, str(time.time()).encode())
                break
            except Exception as exc:  # the election: asked again (raised past the deadline)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no write committed within 600 s of the leader's kill ({exc})") from exc
                time.sleep(0.2)
        fault.recovered_s = time.time() - fault.at
        say(f"fault: the ensemble commits again {fault.recovered_s:.1f} s after the leader's kill")

    def fault_scheduler(self) -> None:
        """kill -9 one scheduler the moment a Spark task ends; recovered: a task of either DAG is queued
        (by the other scheduler, or by the restarted one). Not only of that run: its last task may have
        been queued in the moment before the kill."""
        epoch, task, _ = self.running_spark_task(min_seconds=0.0)
        run = self.query("SELECT run_id FROM dag_run WHERE dag_id = %s AND logical_date = %s", DAG_ID,
                         ORIGIN + datetime.timedelta(days=epoch - 1))[0][0]
        self._until(lambda: self.query("SELECT 1 FROM task_instance WHERE dag_id = %s AND run_id = %s AND task_id = "
                                       "%s AND state <> 'running'", DAG_ID, run, task), 900)
        fault = Fault("scheduler killed", "scheduler", time.time(), f"as {task} of epoch {epoch} ended")
        self.kill("scheduler")
        say(f"fault: kill -9 scheduler as {task} of epoch {epoch} ends (scheduler-2 keeps scheduling)")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note("scheduler", fault.at)
        fault.recovered_s = self._until(lambda: self.query(
            "SELECT 1 FROM task_instance WHERE dag_id IN (%s, %s) AND queued_dttm > to_timestamp(%s)",
            DAG_ID, REPORT_DAG, fault.at), 600) - fault.at
        say(f"fault: a task queued again {fault.recovered_s:.1f} s after the scheduler's kill")

    def trigger_owner(self) -> tuple[str | None, int | None]:
        """(component, job id) of the triggerer running most of the deferred tasks' triggers: a job is the
        process of the name whose latest start came last before the job started."""
        rows = self.query("SELECT j.id, j.start_date FROM trigger t JOIN job j ON j.id = t.triggerer_id WHERE "
                          "j.state = 'running' GROUP BY j.id, j.start_date ORDER BY count(*) DESC LIMIT 1")
        if not rows:
            return None, None
        spawned = self.refresh()["spawned_at"]
        before = [(at, n) for n, at in spawned.items() if n.startswith("triggerer") and at <= rows[0][1].timestamp()]
        return (max(before)[1] if before else None), int(rows[0][0])

    def fault_triggerer(self) -> None:
        """kill -9 the triggerer running the deferred tasks' triggers (epoch opening, barrier, sealed
        sensor); recovered: none of them is left on the dead triggerer's job."""
        self._until(lambda: self.trigger_owner()[0] is not None, 900)
        name, job = self.trigger_owner()
        assert name is not None
        fault = Fault("triggerer with the deferred triggers killed", name, time.time(), f"trigger job {job}")
        self.kill(name)
        say(f"fault: kill -9 {name}, which runs the deferred tasks' triggers (job {job})")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note(name, fault.at)
        fault.recovered_s = self._until(lambda: not self.query(
            "SELECT 1 FROM trigger WHERE triggerer_id = %s", job), 600) - fault.at
        say(f"fault: the triggers left {name}'s job {fault.recovered_s:.1f} s after the kill")

    def fault_spark_worker(self) -> None:
        """kill -9 a Spark worker (and its executor) mid-job; recovered: that partition sealed."""
        epoch, task, _ = self.running_spark_task(min_seconds=1.0)
        fault = Fault("Spark worker killed mid-job", "spark-worker-1", time.time(), f"epoch {epoch} {task}")
        self.kill("spark-worker-1")
        say(f"fault: kill -9 spark-worker-1 during {task} of epoch {epoch}")
        self.faults.append(fault)
        fault.restarted = self.supervisor_note("spark-worker-1", fault.at)
        fault.recovered_s = self.wait_sealed(epoch, SPARK_TASKS[task], fault.at)

    def fault_second_deployment(self) -> None:
        """Start a second deployment mid-run: its own PostgreSQL, Redis, API server, DAG processor,
        scheduler, triggerer and Celery worker, running the same DAG on the same ensemble, pipeline and
        storage (started in the background; the run then checks one seal per (epoch, partition) and one
        report run per day across both deployments' databases)."""
        from cluster_topology import Cluster

        self.running_spark_task(min_seconds=0.0)  # mid-run
        state = self.refresh()
        fault = Fault("second deployment started mid-run", "second", time.time(),
                      "own metadata DB, broker, scheduler, triggerer, 1 Celery worker; same DAG, pipeline, storage",
                      awaited=False)
        self.faults.append(fault)
        self.second_fault = fault
        self.second = Cluster(Path(state["base"]) / SECOND, days=self.days, deployment=SECOND, shared=state,
                              same_pipeline=True, workers=1)

        def start() -> None:
            try:
                self.second.start()
                self.second.write_state()  # for a ``run`` in another process, which counts its report runs too
                self.second_ready.set()
                driver = type(self)(self.second.state)  # a Driver of the second deployment
                try:
                    for dag_id in (REPORT_DAG, DAG_ID):
                        done = driver.airflow("dags", "unpause", dag_id)
                        if done.returncode:
                            raise RuntimeError(f"second deployment: unpause {dag_id}: {done.stderr[-1000:]}")
                finally:
                    driver.close()
                fault.detail += f"; up and unpaused {time.time() - fault.at:.0f} s after its start"
                say(f"fault: the second deployment is up ({fault.detail})")
            except Exception as exc:  # noqa: BLE001 - reported with the run's figures, never silent
                self.fault_errors.append(f"second-deployment: {type(exc).__name__}: {exc}")
                fault.detail += f"; did not come up: {type(exc).__name__}: {exc}"

        say("fault: starting a second deployment of the same DAG on the same ensemble (in the background)")
        self.second_start = threading.Thread(target=start, name="second-deployment", daemon=True)
        self.second_start.start()

    def fault_takeover(self) -> None:
        """Once the second deployment is up, stop the first deployment's schedulers and Celery workers
        mid-epoch, as an operator stopping it (kill -9, and its supervisor told to leave them stopped); the
        second deployment's open task waits out the first's leadership lease, takes the leadership and the
        epoch over and seals it. Recovered: that epoch sealed after the second deployment took the lead;
        the figure is split into the first's lease still running at the stop (the open task's
        ``lease_seconds``, 600 s in the unchanged DAG, less the time since its last renewal), the second's
        wake-up after the expiry and the epoch's work under the second. Then the first deployment's
        processes are started again (its runs of sealed epochs skip)."""
        if self.second_start is None:
            self.fault_second_deployment()
        if not self.second_ready.wait(1800):
            raise TimeoutError("the second deployment did not come up")
        epoch, task, _ = self.running_spark_task(min_seconds=0.0)
        names = sorted(n for n in self.components() if n.startswith(("scheduler", "celery-worker-")))
        held = Path(self.state["base"]) / HELD_FILE
        from airflow_epochs.private_files import write_private

        write_private(held, json.dumps(names))
        fault = Fault("first deployment stopped mid-epoch: takeover", ", ".join(names), time.time(),
                      f"during {task} of epoch {epoch}")
        self.faults.append(fault)
        try:
            for name in names:
                self.kill(name)
            lease = self.ledger.lease().holder()  # the first's last renewal: its last open before the stop
            if lease is None or lease.owner == SECOND:
                raise RuntimeError(f"the first deployment did not lead at the stop (lease: {lease})")
            fault.detail += f"; {lease.owner}'s lease ran to {lease.remaining(fault.at):.0f} s after the stop"
            say(f"fault: stopped {', '.join(names)} of the first deployment during {task} of epoch {epoch}; the "
                f"second must wait out {lease.owner}'s leadership lease ({lease.remaining(fault.at):.0f} s left) "
                "and take the epoch over")
            sealed = self._until(lambda: self._sealed_by(SECOND, epoch), 1800)
            fault.recovered_s = sealed - fault.at
            events = self.history()
            taken = min(e.at for e in events if e.event == "leader_changed" and e.detail.get("owner") == SECOND)
            at = next(e.at for e in events if e.event == "epoch_sealed" and e.detail.get("epoch") == epoch)
            fault.parts = takeover_parts(fault.at, lease.until.timestamp(), taken, at)
            fault.recovered_s = at - fault.at  # the seal's own time (the poll above saw it up to 0.5 s later)
        finally:
            held.unlink(missing_ok=True)
            fault.restarted = f"{', '.join(names)}, by the cluster's supervisor once " + \
                ("the epoch was sealed" if fault.recovered_s is not None else "the wait for the seal gave up")
        say(f"fault: epoch {epoch} sealed under the second deployment {fault.recovered_s:.1f} s after the stop: "
            f"{fault.made_of()}")

    def _sealed_by(self, owner: str, epoch: int) -> bool:
        """Whether ``epoch`` is sealed after ``owner`` took the leadership (read from the history's order, not
        from the seal's owner: before the fix of issue 36's takeover, the standby carried on the stopped
        leader's attempt, whose owner the seal then named)."""
        events = self.history()
        led = [e.at for e in events if e.event == "leader_changed" and e.detail.get("owner") == owner]
        sealed = [e.at for e in events if e.event == "epoch_sealed" and e.detail.get("epoch") == epoch]
        return bool(led and sealed) and min(led) <= sealed[0]

    def second_settled(self, deadline: float) -> None:
        """Wait until the second deployment has no DAG run left queued or running (its runs of the days
        the first sealed finish with their epoch tasks skipped)."""
        while self.second_up() and time.monotonic() < deadline:
            left = self.second.stack.query("SELECT count(*) FROM dag_run WHERE dag_id IN (%s, %s) AND state IN "
                                           "('queued', 'running')", DAG_ID, REPORT_DAG)
            runs = self.second.stack.query("SELECT count(*) FROM dag_run WHERE dag_id = %s", DAG_ID)
            if not left[0][0] and runs[0][0] >= self.days:
                break
            time.sleep(2)
        if self.second_up():
            states = self.second.stack.query("SELECT dag_id, state, count(*) FROM dag_run GROUP BY 1, 2 ORDER BY 1, 2")
            self.second_fault.detail += "; its runs: " + ", ".join(f"{d} {s} {n}" for d, s, n in states)

    def _until(self, predicate: Callable[[], Any], timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return time.time()
            time.sleep(0.5)
        raise TimeoutError(f"not within {timeout:.0f} s")


def _session(sid: int) -> list[int]:
    """The processes of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # state, ppid, pgrp, session
                found.append(int(entry.name))
    return found


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its parents, up to init."""
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # the field after the state: the parent's pid
    return found


