"""The faults of ``demo.sh --faults``, injected into the running pipeline, and the report of what they did.

- **ZooKeeper crash**: once epoch 2 has a sealed partition, the server is killed (SIGKILL) and started
  again 20 s later on the same port and data; the running DAG run's tasks wait and retry by themselves.
- **A task killed mid-Spark-job**: epoch 4's DAG run runs in its own process (``airflow dags test``),
  killed (SIGKILL) while one of its Spark jobs runs; the demo then runs the day again, as Airflow's
  scheduler does when a task's heartbeat stops: the epoch resumes under the same attempt, the killed
  job's output stays invisible and the job runs again from the last sealed snapshot.
- **A competing coordinator**: while the demo runs epoch 6, a second Airflow deployment (its own
  metadata database, owner ``rival``) runs the same day of the same DAG; the leadership lease makes it
  wait, then it skips the epoch that the demo sealed, writing nothing.

Every fault is a real process event (kill -9, a second deployment); nothing is simulated in the code
under test. The report says when each happened, how long the pipeline waited, and that the sealed
results equal a one-shot Spark computation over the same days.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ZOOKEEPER_EPOCH = 2
TASK_KILL_EPOCH = 4
RIVAL_EPOCH = 6
OUTAGE_SECONDS = 20.0
MIN_DAYS = RIVAL_EPOCH


@dataclass
class Fault:
    """One injected fault and what it cost."""

    name: str
    epoch: int
    injected_at: float = 0.0     # wall-clock seconds
    details: list[str] = field(default_factory=list)
    waited: float | None = None  # seconds the pipeline lost to it
    ok: bool = False
    partition: str | None = None  # the partition whose job was killed (task fault)


class FaultInjector:
    """Injects the three faults into the demo's run; call :meth:`start` before the first epoch,
    :meth:`run_day` for every epoch (it runs the day the way the fault plan says) and :meth:`finish`.

    :param zookeeper: the demo's :class:`EmbeddedZooKeeper` (killed and restarted here).
    :param on_restart: called after ZooKeeper is back (to record its new process identity).
    :param settings: the ZooKeeperSettings its clients connect with (credentials, TLS).
    :param say: the demo's printer.
    """

    def __init__(self, *, zookeeper: Any, on_restart: Callable[[], None], base: Path, settings: Any,
                 pipeline: str, dag_id: str, say: Callable[[str], None]) -> None:
        self.zookeeper = zookeeper
        self.on_restart = on_restart
        self.base = base
        self.settings = settings  # how our clients connect to it (credentials, TLS)
        self.pipeline = pipeline
        self.dag_id = dag_id
        self.say = say
        self.faults: dict[str, Fault] = {}
        self.finished = threading.Event()
        self.problems: list[str] = []
        self._zk_thread: threading.Thread | None = None
        self._rival_home = base / "airflow-rival"
        self._rival_ready: subprocess.Popen[bytes] | None = None
        self._airflow = str(Path(sys.executable).parent / "airflow")
        self._rival_waiting: float | None = None
        self._zookeeper_back: float | None = None
        self._demo_beside_rival: float | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        # The thread that restarts ZooKeeper must live as long as the run: the restarted server is
        # started to die with the thread that started it (PR_SET_PDEATHSIG follows the thread).
        self._zk_thread = threading.Thread(target=self._zookeeper_crash, name="fault-zookeeper", daemon=True)
        self._zk_thread.start()
        # The rival deployment's own metadata database, made ready meanwhile.
        self._rival_home.mkdir(parents=True, exist_ok=True)
        with open(self._rival_home / "migrate.log", "wb") as log:
            self._rival_ready = subprocess.Popen([self._airflow, "db", "migrate"], env=self._rival_env(),
                                                 stdout=log, stderr=subprocess.STDOUT)

    def finish(self) -> None:
        self.finished.set()
        if self._zk_thread is not None:
            self._zk_thread.join(5)
        if self._rival_ready is not None and self._rival_ready.poll() is None:
            self._rival_ready.kill()
            self._rival_ready.wait()

    # -- fault 1: the ZooKeeper server crashes mid-epoch -----------------------------------------

    def _zookeeper_crash(self) -> None:
        fault = self.faults.setdefault("zookeeper", Fault("ZooKeeper server killed (SIGKILL), restarted "
                                                          f"{OUTAGE_SECONDS:g} s later", ZOOKEEPER_EPOCH))
        try:
            partition = self._wait_for_a_seal(ZOOKEEPER_EPOCH)
            if partition is None:
                return
            self.zookeeper.kill(0)
            fault.injected_at = time.time()
            fault.details.append(f"killed once partition {partition} of epoch {ZOOKEEPER_EPOCH} was sealed, "
                                 "with the rest of the epoch to do")
            self.say(f"FAULT: ZooKeeper server killed (SIGKILL) during epoch {ZOOKEEPER_EPOCH}; "
                     f"restarting it in {OUTAGE_SECONDS:g} s")
            if self.finished.wait(OUTAGE_SECONDS):
                return
            self.zookeeper.restart(0)
            self._zookeeper_back = time.time()
            self.on_restart()
            fault.details.append(f"restarted after {time.time() - fault.injected_at:.1f} s (same port and data)")
            self.say("FAULT: ZooKeeper server is back (same port and data); nobody touched the DAG run")
        except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is reported, not raised
            self.problems.append(f"ZooKeeper fault: {type(exc).__name__}: {exc}")
        finally:
            self.finished.wait()  # keep the restarted server's parent thread alive until the run ends

    def _wait_for_a_seal(self, epoch: int) -> str | None:
        from airflow_epochs.coordination import EpochLedger, PipelineNotFound

        client = self.settings.start_client(timeout=30)
        try:
            ledger = EpochLedger(client, self.pipeline)
            while not self.finished.is_set():
                try:
                    for partition in ("flights", "weather"):
                        if ledger.seal(epoch, partition) is not None:
                            return partition
                except PipelineNotFound:
                    pass
                time.sleep(0.05)
            return None
        finally:
            client.stop()
            client.close()

    # -- running each day --------------------------------------------------------------------------

    def run_day(self, epoch: int, day: datetime, run_in_process: Callable[[], str], conf: dict[str, Any]) -> str:
        """Run epoch ``epoch`` (the day ``day``) by the plan; returns the final DAG run state."""
        if epoch == TASK_KILL_EPOCH:
            self._kill_a_task_mid_job(epoch, day, conf)
        if epoch == RIVAL_EPOCH:
            rival = self._start_rival(epoch, day, conf)
            started = time.monotonic()
            state = run_in_process()
            self._demo_beside_rival = time.monotonic() - started
            self._settle_rival(rival, epoch)
            return state
        return run_in_process()

    def _env(self) -> dict[str, str]:
        # INFO: the other processes' logs say what they decided (waited, skipped, resumed).
        return {**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO"}

    def _rival_env(self) -> dict[str, str]:
        home = self._rival_home
        return {**self._env(), "AIRFLOW_HOME": str(home), "AIRFLOW_EPOCHS_DEPLOYMENT": "rival",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}

    # -- fault 2: a task killed while its Spark job runs -----------------------------------------

    def _kill_a_task_mid_job(self, epoch: int, day: datetime, conf: dict[str, Any]) -> None:
        from airflow_epochs.coordination import EpochLedger, PipelinePaths

        fault = self.faults.setdefault("task", Fault("a task killed (SIGKILL) in the middle of its Spark job",
                                                     epoch))
        log_path = self.base / f"killed-run-epoch-{epoch}.log"
        client = self.settings.start_client(timeout=30)
        try:
            paths = PipelinePaths(self.pipeline)
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([self._airflow, "dags", "test", self.dag_id, day.isoformat(), "-c",
                                         json.dumps(conf)], env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            self.say(f"FAULT: epoch {epoch} runs in its own process (airflow dags test, pid {proc.pid}); it is "
                     "killed as soon as one of its Spark jobs is running")
            running = None
            deadline = time.monotonic() + 300
            while running is None and time.monotonic() < deadline and proc.poll() is None:
                for partition in ("flights", "weather"):
                    lock = paths.lock(f"write.{partition}")
                    if client.exists(lock) and client.get_children(lock):
                        running = partition
                        break
                time.sleep(0.02)
            if running is None:
                proc.kill()
                proc.wait()
                self.problems.append(f"task fault: no Spark job of epoch {epoch} was seen running "
                                     f"(log {log_path})")
                return
            time.sleep(0.5)  # well inside the job (a warm Spark Connect job takes a few seconds)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            fault.injected_at = time.time()
            ledger = EpochLedger(client, self.pipeline)
            sealed_before = ledger.seal(epoch, running) is not None
            producer = {"flights": "clean_flights", "weather": "hourly_weather"}[running]
            fault.details.append(f"killed the DAG run process (pid {proc.pid}) while {producer}'s Spark job for "
                                 f"partition {running} ran"
                                 + (" (its vote had landed just before)" if sealed_before else
                                    " (no vote yet: its output is in a run directory no seal names)"))
            fault.details.append("the demo ran the day again, as Airflow's scheduler retries a task whose "
                                 "process died; the open task resumed the epoch's attempt")
            self.say(f"FAULT: killed the DAG run of epoch {epoch} (SIGKILL) while {producer}'s Spark job ran; "
                     "running the day again")
            fault.partition = running
        finally:
            client.stop()
            client.close()

    # -- fault 3: a competing coordinator --------------------------------------------------------

    def _start_rival(self, epoch: int, day: datetime, conf: dict[str, Any]) -> subprocess.Popen[bytes] | None:
        fault = self.faults.setdefault("rival", Fault("a competing coordinator: a second Airflow deployment "
                                                      "runs the same day of the same DAG", epoch))
        if self._rival_ready is not None:
            self._rival_ready.wait(300)
            if self._rival_ready.returncode != 0:
                self.problems.append(f"rival: airflow db migrate failed (log {self._rival_home / 'migrate.log'})")
                return None
        log_path = self._rival_home / f"run-epoch-{epoch}.log"
        with open(log_path, "wb") as log:
            rival = subprocess.Popen([self._airflow, "dags", "test", self.dag_id, day.isoformat(), "-c",
                                      json.dumps(conf)], env=self._rival_env(), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        fault.injected_at = time.time()
        self.say(f"FAULT: a competing coordinator (deployment 'rival', pid {rival.pid}) runs epoch {epoch}; "
                 "the demo runs the same epoch as soon as the rival is waiting for it")
        # Let the rival get to its decision first: it must find the demo leading and wait, not the
        # epoch already sealed.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and rival.poll() is None:
            if "waits up to" in log_path.read_text(errors="replace"):
                self._rival_waiting = time.time()
                fault.details.append(f"deployment 'rival' (its own metadata database, pid {rival.pid}) started "
                                     f"epoch {epoch}'s DAG run first; it found demo leading and waited (deferred) "
                                     f"{self._rival_waiting - fault.injected_at:.1f} s after it started")
                break
            time.sleep(0.2)
        else:
            self.problems.append(f"rival: it never said it was waiting for the leader (log {log_path})")
        return rival

    def _settle_rival(self, rival: subprocess.Popen[bytes] | None, epoch: int) -> None:
        fault = self.faults["rival"]
        if rival is None:
            return
        try:
            code = rival.wait(300)
        except subprocess.TimeoutExpired:
            os.killpg(rival.pid, signal.SIGKILL)
            rival.wait()
            self.problems.append(f"rival: its run of epoch {epoch} did not end within 300 s")
            return
        ended = time.time()
        text = (self._rival_home / f"run-epoch-{epoch}.log").read_text(errors="replace")
        skipped = f"epoch {epoch} is already sealed by demo" in text
        fault.details.append(f"rival's run ended with exit code {code} after {ended - fault.injected_at:.1f} s: "
                             + (f"woken by the seal, it skipped the epoch ('epoch {epoch} is already sealed by "
                                "demo')" if skipped else "it did NOT report skipping the sealed epoch"))
        fault.ok = code == 0 and skipped and self._rival_waiting is not None

    # -- the report --------------------------------------------------------------------------------

    def measure(self, ledger: Any, epoch_seconds: dict[int, float]) -> None:
        """Fill in how long the pipeline waited for each fault, from the recorded history."""
        events = ledger.history()
        typical = statistics.median([s for e, s in epoch_seconds.items()
                                     if e not in (ZOOKEEPER_EPOCH, TASK_KILL_EPOCH, RIVAL_EPOCH, 1)] or [0.0])
        zk = self.faults.get("zookeeper")
        if zk is not None and zk.injected_at:
            after = [e for e in events if e.at > zk.injected_at and e.detail.get("epoch") == zk.epoch]
            if after:
                zk.waited = after[0].at - zk.injected_at
                back = f", {after[0].at - self._zookeeper_back:.1f} s after it was back" if self._zookeeper_back else ""
                zk.details.append(f"first state change after the kill: {after[0].event} "
                                  f"{after[0].detail.get('partition') or ''} at +{zk.waited:.1f} s{back} (the "
                                  "tasks' next connection attempt, then the rest of the step)")
            zk.ok = any(e.event == "epoch_sealed" and e.detail.get("epoch") == zk.epoch for e in after)
        task = self.faults.get("task")
        if task is not None and task.injected_at and task.partition:
            partition = task.partition
            seals = [e for e in events if e.event == "partition_sealed" and e.detail.get("epoch") == task.epoch
                     and e.detail.get("partition") == partition]
            if seals:
                task.waited = max(0.0, seals[0].at - task.injected_at)
                task.details.append(f"partition {partition} sealed {task.waited:.1f} s after the kill, once")
            task.ok = len(seals) == 1
        rival = self.faults.get("rival")
        if rival is not None and self._demo_beside_rival is not None:
            # Only the demo's own run counts: the seconds it held back on purpose, until the rival was
            # waiting, are not a cost of the fault.
            rival.waited = max(0.0, self._demo_beside_rival - typical)
            rival.details.append(f"the demo's run of epoch {RIVAL_EPOCH}, beside the waiting rival, took "
                                 f"{self._demo_beside_rival:.1f} s")
            owners = {str(e.detail.get("owner")) for e in events if e.detail.get("epoch") == RIVAL_EPOCH
                      and "owner" in e.detail}
            rival.details.append(f"epoch {RIVAL_EPOCH}'s recorded owners: {sorted(owners) or ['demo']}; "
                                 f"nothing was written by rival")
            rival.ok = rival.ok and "rival" not in owners
        for fault in self.faults.values():
            if fault.epoch in epoch_seconds:
                fault.details.append(f"epoch {fault.epoch} took {epoch_seconds[fault.epoch]:.1f} s in all "
                                     f"(a typical epoch here: {typical:.1f} s)")

    def report(self, ledger: Any, days: int, epoch_seconds: dict[int, float], check_markdown: str,
               once: list[str]) -> str:
        """The fault report (Markdown)."""
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        lines = [f"# Fault demo: {self.dag_id}, epochs 1..{days}", "", f"Run at {stamp}. Every fault below is a "
                 "real process event; the run went on by itself after each one.", "",
                 "| # | fault | epoch | injected | pipeline waited | outcome |", "|---|---|---|---|---|---|"]
        for n, fault in enumerate(self.faults.values(), start=1):
            at = datetime.fromtimestamp(fault.injected_at, timezone.utc).strftime("%H:%M:%S") if fault.injected_at \
                else "-"
            waited = f"{fault.waited:.1f} s" if fault.waited is not None else "-"
            lines.append(f"| {n} | {fault.name} | {fault.epoch} | {at} | {waited} | "
                         f"{'recovered by itself' if fault.ok else '**NOT recovered**'} |")
        for n, fault in enumerate(self.faults.values(), start=1):
            lines += ["", f"{n}. **{fault.name}** (epoch {fault.epoch})"] + [f"   - {d}" for d in fault.details]
        if self.problems:
            lines += ["", "Problems:"] + [f"- {p}" for p in self.problems]
        lines += ["", "## Every epoch sealed once", ""] + [f"- {line}" for line in once]
        lines += ["", "## Sealed results vs a one-shot Spark computation", "", check_markdown]
        return "\n".join(lines) + "\n"

    @property
    def all_recovered(self) -> bool:
        return not self.problems and len(self.faults) == 3 and all(f.ok for f in self.faults.values())
