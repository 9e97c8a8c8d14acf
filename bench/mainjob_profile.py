"""Where a task's seconds go: py-spy over the scheduler's process tree during a ``mainjob`` side (issue 50).

``python bench/mainjob.py --profile DIR`` records every process the scheduler starts (LocalExecutor
workers, each task's supervisor and task runner) with py-spy (``--subprocesses --idle --threads``: a
waiting thread is sampled too, so a sleep or a blocking ZooKeeper call shows as the time it takes),
keeps the task logs in ``DIR/logs`` and writes ``DIR/<side>.txt`` (py-spy's collapsed stacks) and
``DIR/<side>-summary.txt``: for each task, the main thread's samples by the functions they were in
(inclusive), so "where do 6 s of a producer task go" has an answer in seconds.

py-spy is not a dependency of the project: ``pip install py-spy`` into the venv first.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

RATE = 100  # samples a second: one sample is 10 ms of a thread's time
# py-spy's root frame for a process: process 1234:"airflow task runner: dag task run ..."
_PROCESS = re.compile(r'^process (\d+):"(.*)"$')
_THREAD = re.compile(r'^thread \((0x[0-9A-Fa-f]+|\d+)\)(?:: "?([^"]*)"?)?$')


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise RuntimeError("--profile needs py-spy in this venv: pip install py-spy")
    return found


class Recorder:
    """py-spy recording ``pid`` and every process it starts, into ``out`` (collapsed stacks)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [py_spy(), "record", "--pid", str(pid), "--subprocesses", "--idle", "--threads", "--rate", str(RATE),
             "--format", "raw", "--output", str(out), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(".log"), "wb"))  # noqa: SIM115

    def stop(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def task_of(cmdline: str, names: dict[str, str]) -> str | None:
    """The task a process runs, by its title: Airflow's supervisor (``airflow supervisor: <ti id>``) and task
    runner (``airflow worker -- <ti id>``) name the task instance's id, ``names`` maps ids to tasks."""
    for key, task in names.items():
        if key in cmdline:
            return task
    return None


def _frame(frame: str) -> str:
    return re.sub(r" \((.*/)?([^/]*):\d+\)$", r" (\2)", frame)


def _samples(stacks: Path) -> list[tuple[str, str, list[str], int]]:
    """(pid, title, main-thread frames root first, count) of every main-thread sample; a process is named by
    the innermost process frame (py-spy nests a child under its parents)."""
    out = []
    for line in stacks.read_text(errors="replace").splitlines():
        body, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = body.split(";")
        procs = [i for i, f in enumerate(frames) if _PROCESS.match(f)]
        if not procs or procs[-1] + 1 >= len(frames):
            continue
        match = _PROCESS.match(frames[procs[-1]])
        thread = _THREAD.match(frames[procs[-1] + 1])
        if match is None or thread is None or (thread.group(2) or "") != "MainThread":
            continue
        out.append((match.group(1), match.group(2), frames[procs[-1] + 2:], int(count)))
    return out


def _by_code(samples: list[tuple[str, str, list[str], int]]) -> dict[str, str]:
    """Without the task instance ids: each task process named by the task code it ran, the first frame below
    the SDK's ``_execute_task`` that is not Airflow's (``SparkEpochOperator.execute (spark.py)``,
    ``clean_flights (mainjob_airflow.py)``)."""
    named: dict[str, str] = {}
    for pid, _title, frames, _n in samples:
        if pid in named or not any(f.startswith("_execute_task ") for f in frames):
            continue
        below = frames[next(i for i, f in enumerate(frames) if f.startswith("_execute_task ")) + 1:]
        pick = next((f for f in below if not re.search(r"\((airflow|standard|contextlib|functools)[/.]", f)), None)
        if pick is not None:
            named[pid] = _frame(pick)
    return named


def summarise(stacks: Path, names: dict[str, str] | None = None, top: int = 45) -> str:
    """Per task: its processes' main-thread seconds, and the functions they were spent in (inclusive).

    :param names: task instance id -> task (from the metadata database); without it, task runners are named
        by the task code they ran and supervisors are not told apart.
    """
    if not isinstance(names, dict):
        names = None
    samples = _samples(stacks)
    code = _by_code(samples) if names is None else {}
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total: collections.Counter[str] = collections.Counter()
    processes: dict[str, set[str]] = collections.defaultdict(set)
    for pid, title, frames, n in samples:
        if "worker -- " not in title or title.endswith("<idle>"):
            continue  # the scheduler, or an idle executor worker
        # a task's supervisor and its task process (forked from it) carry the same title
        kind = "runner" if any(f.startswith("_fork_main ") for f in frames) else "supervisor"
        task = task_of(title, names) if names is not None else code.get(pid, "(not a task's code)")
        if task is None:
            continue
        key = f"{task} [{kind}]"
        processes[key].add(pid)
        total[key] += n
        seen: set[str] = set()
        for frame in map(_frame, frames):
            if frame not in seen:
                seen.add(frame)
                inclusive[key][frame] += n
    out = []
    for key in sorted(total):
        runs = len(processes[key])
        out.append(f"== {key}: {total[key] / RATE:.1f} s over {runs} process(es), "
                   f"{total[key] / RATE / max(runs, 1):.2f} s each (main thread; functions inclusive, per process)")
        for name, n in inclusive[key].most_common(top):
            out.append(f"  {n / RATE / max(runs, 1):7.2f}  {name}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1])))
