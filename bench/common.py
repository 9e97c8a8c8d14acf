"""What every benchmark group shares: rows with stable ids, fair repetition, and ZooKeeper counters.

A row compares ours with the peer a user would otherwise pick, measured in the same run. Fairness
rules the groups follow: both sides start from the same event (a start gate opened after every
participant is connected), are warmed up, run at least ``REPEATS`` times in alternating order, and
are reported as the median with the spread (min..max); client CPU is measured beside wall time.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.servers.embedded_zookeeper import four_letter_word

REPEATS = 5


@dataclass
class Row:
    """One measure. ``better`` says which way is good, so ``advantage`` > 1 always means ours wins."""

    id: str
    group: str
    measure: str
    ours: float | None
    peer: float | None
    unit: str
    peer_name: str
    better: str = "lower"  # "lower" | "higher" | "none" (no peer: a figure of ours)
    ours_spread: tuple[float, float] | None = None
    peer_spread: tuple[float, float] | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def advantage(self) -> float | None:
        if not self.ours or not self.peer or self.better == "none":
            return None
        return self.peer / self.ours if self.better == "lower" else self.ours / self.peer

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "advantage": self.advantage}


ROWS: list[Row] = []


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Replace ``path`` with ``report`` in one step (a reader, or a run killed mid-write, sees the old
    file or the new one, never half of one): written beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(report, out, indent=2)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def spread(values: list[float]) -> tuple[float, float]:
    return (min(values), max(values))


def _verdict(advantage: float) -> str:
    """Say which side won: an advantage under 1 means the peer did better."""
    if advantage >= 1:
        return f" (ours better x{advantage:.2f})"
    return f" (peer better x{1 / advantage:.2f})"


def add(row: Row) -> Row:
    ROWS.append(row)
    adv = row.advantage
    print(f"  [{row.id}] {row.measure}: ours {fmt(row.ours)} {row.unit}"
          + (f", {row.peer_name} {fmt(row.peer)} {row.unit}" if row.peer is not None else "")
          + (_verdict(adv) if adv else ""), flush=True)
    return row


def compare(
    id: str, group: str, measure: str, ours: list[float], peer: list[float] | None, unit: str, peer_name: str, *,
    better: str = "lower", note: str = "", **extra: Any,
) -> Row:
    """A row from repeated samples of both sides: medians, with the spread kept."""
    return add(Row(id, group, measure, statistics.median(ours), statistics.median(peer) if peer else None, unit,
                   peer_name, better, spread(ours), spread(peer) if peer else None,
                   note or f"median of {len(ours)} runs" + (f" / {len(peer)}" if peer else ""), extra))


def figure(id: str, group: str, measure: str, value: float | None, unit: str, note: str = "", **extra: Any) -> Row:
    """A figure of ours with no peer (costs, capacity)."""
    return add(Row(id, group, measure, value, None, unit, "-", "none", note=note, extra=extra))


def alternate(repeats: int, ours: Callable[[], float], peer: Callable[[], float]) -> tuple[list[float], list[float]]:
    """Run both sides ``repeats`` times each, alternating which goes first (ours-peer, peer-ours, ...)."""
    mine: list[float] = []
    theirs: list[float] = []
    for i in range(repeats):
        if i % 2 == 0:
            mine.append(ours())
            theirs.append(peer())
        else:
            theirs.append(peer())
            mine.append(ours())
    return mine, theirs


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def mntr(port: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in four_letter_word(port, "mntr").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[-1]
    return out


def packets(port: int) -> int:
    """Requests the server has received (every client request, pings included)."""
    return int(mntr(port)["zk_packets_received"])


def client(hosts: str, timeout: float = 30.0) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start(timeout=30)
    return zk


def count_znodes(zk: KazooClient, path: str, *, with_paths: bool = False) -> tuple[int, int]:
    """(znodes, data bytes) under ``path``, itself included; ``with_paths`` adds each znode's path length,
    as ZooKeeper's ``zk_approximate_data_size`` does."""
    nodes = 0
    size = 0
    pending = [path]
    while pending:
        level = pending
        pending = []
        stats = [zk.exists_async(p) for p in level]
        children = [zk.get_children_async(p) for p in level]
        for p, stat, kids in zip(level, stats, children, strict=True):
            found = stat.get()
            if found is None:
                continue
            nodes += 1
            size += found.dataLength + (len(p) if with_paths else 0)
            pending.extend(f"{p.rstrip('/')}/{c}" for c in kids.get())
    return nodes, size


class Gate:
    """A start gate: workers wait at it; the clock starts when it opens, after every one is ready."""

    def __init__(self, parties: int) -> None:
        self.ready = threading.Barrier(parties + 1)
        self.go = threading.Event()
        self.opened_at = 0.0

    def wait_ready(self) -> None:
        self.ready.wait()

    def open(self) -> float:
        self.ready.wait()  # every worker is connected and waiting
        self.opened_at = time.perf_counter()
        self.go.set()
        return self.opened_at


def cpu_seconds() -> float:
    """CPU time of this process (all threads: the clients' own I/O threads included)."""
    return time.process_time()


def process_cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) of another process, e.g. the ZooKeeper server; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LoadAverage:
    """The 1-minute load average sampled every 15 s while the benchmark runs (the machine is shared)."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-average", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(15):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()

    def summary(self) -> str:
        values = [*self.samples, os.getloadavg()[0]]
        return f"load average {min(values):.1f} to {max(values):.1f} (median {statistics.median(values):.1f})"
