"""The ``mainjob`` group's fault scenario (issue 50): kill -9 of the process running a day's Spark job, mid-job.

During a side's catch-up, :class:`MidJobKill` waits until the ``daily`` job of day ``day`` has started
writing (its output folder exists: Spark makes it when the write starts) and then SIGKILLs the process
that runs it: for an Airflow side the task's own process (the child of its supervisor, both titled with
the task instance's id), for Dagster the step's process (the multiprocess executor's child that runs the
``daily`` step, see :func:`dagster_step_process`). What happens next is each side's own: Airflow's retry
of the task, Dagster's run failure (the backfill's asset runs have no retry policy, as
``dagster_mainjob/definitions.py`` declares none); the rows say what came of it.

:func:`output_writes` counts, per day, the Spark write jobs whose files are in the day's visible output: a
killed job that went on writing on the Connect server beside the retry's shows as two.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# part-00000-<write job uuid>-c000.snappy.parquet
_PART = re.compile(r"^part-\d+-([0-9a-f-]{36})")


class MidJobKill:
    """Kill (SIGKILL) ``process()`` once ``started()`` says the day's job is writing; once, in a thread.

    :param started: whether the job has started writing.
    :param process: the process to kill now (None: not found yet).
    """

    def __init__(self, what: str, started: Callable[[], bool], process: Callable[[], Any], *,
                 timeout: float = 1800.0) -> None:
        self.what = what
        self.started = started
        self.process = process
        self.timeout = timeout
        self.killed: dict[str, Any] | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mid-job-kill", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self.started():
                    proc = self.process()
                    if proc is not None:
                        cmdline = " ".join(" ".join(proc.cmdline()).split())[:120]  # a title pads with spaces
                        proc.kill()
                        self.killed = {"pid": proc.pid, "at": time.time(), "process": cmdline}
                        return
                self._stop.wait(0.2)
        except Exception as exc:  # noqa: BLE001 - said in the rows, the catch-up goes on
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> str:
        """Stop looking; what was killed, in words."""
        self._stop.set()
        self._thread.join(10)
        if self.killed is not None:
            return f"killed {self.what} (pid {self.killed['pid']}: {self.killed['process']!r}) mid-job"
        return f"{self.what} was never killed ({self.error or 'the job was not seen running'})"


def writing(folder_glob: str) -> Callable[[], bool]:
    """Whether a folder matching ``folder_glob`` exists (Spark's write has started)."""
    return lambda: bool(glob.glob(folder_glob))


def airflow_task_process(stack: Any, dag_id: str, task: str, logical_date: Any) -> Callable[[], Any]:
    """The process of the running try of ``task`` of ``dag_id``'s run at ``logical_date``: the child of its
    supervisor (both carry the task instance's id in their title)."""
    import psutil

    def find() -> Any:
        rows = stack.query("SELECT ti.id FROM task_instance ti JOIN dag_run r ON r.dag_id = ti.dag_id AND "
                           "r.run_id = ti.run_id WHERE ti.dag_id = %s AND (ti.task_id = %s OR ti.task_id LIKE %s) "
                           "AND ti.state = 'running' AND r.logical_date = %s", dag_id, task, f"%.{task}",
                           logical_date)
        if not rows:
            return None
        ti_id = str(rows[0][0])
        titled = []
        for proc in psutil.process_iter(["cmdline"]):
            if ti_id in " ".join(proc.info["cmdline"] or ()):
                titled.append(proc)
        pids = {p.pid for p in titled}
        return next((p for p in titled if p.ppid() in pids), None)  # the task process, not its supervisor

    return find


def dagster_step_process(root_pid: Callable[[], int | None], connect_port: int) -> Callable[[], Any]:
    """The process of the Dagster step that runs a Spark job now: under the daemon's tree, a step process of
    the multiprocess executor (a ``multiprocessing`` child of a run worker, itself one) with a connection
    open to the Spark Connect server. (A step's process names no step; when the day's ``daily`` output
    starts, the ``daily`` step is the one talking to Spark: with two days nothing else is.)"""
    import psutil

    def find() -> Any:
        pid = root_pid()
        if pid is None:
            return None
        tree = psutil.Process(pid).children(recursive=True)
        for proc in tree:
            try:
                if "multiprocessing-fork" not in " ".join(proc.cmdline()) or \
                        "multiprocessing-fork" not in " ".join(proc.parent().cmdline()):
                    continue
                if any(c.raddr and c.raddr.port == connect_port for c in proc.net_connections(kind="tcp")):
                    return proc
            except psutil.Error:
                continue
        return None

    return find


def output_writes(data_folder: str) -> int:
    """The Spark write jobs whose part files are in ``data_folder`` (1 for a clean output, 0 when missing)."""
    if not os.path.isdir(data_folder):
        return 0
    jobs = set()
    for path in Path(data_folder).rglob("part-*"):
        match = _PART.match(path.name)
        if match:
            jobs.add(match.group(1))
    return len(jobs)
