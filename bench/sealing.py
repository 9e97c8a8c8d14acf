"""Sealing vs ordering (group ``sealing``): epochs sealed per second with P producers, each voting on
its own partition, against the naive peer that orders every vote under one global ZooKeeper lock,
and against two limits, the same processes against the same server sending bare single creates
through kazoo's async API, pipelined: each vote one multi transaction (``zk_multi_limit_eps_p*``,
the issue's measure), and each process's votes one multi (``zk_multi_batch_limit_eps_p*``, the
shape ours sends, so the bound for it).

Ours votes the way a process hosting several producers should: ``EpochLedger.vote_many``, the
process's votes in one transaction (the fence once, then each vote's steps), sent before the first
answer is awaited, with the epoch's seal behind it on the same connection.

Producers are processes in real life (Airflow tasks, Spark drivers), so here they run in worker
processes too (up to ``PROCESSES``, each with its own kazoo client and one thread per producer it
hosts), not as threads of one interpreter whose lock would make Python's CPU the bottleneck. All
sides use the same started workers and connected clients; for each epoch the workers are told to go
together (ours after the epoch is opened: the peer opens nothing), and the epoch counts when the last
vote returned. Warmed up once, then ``REPEATS`` runs in alternating order; the workers' CPU per vote
is reported beside the rate.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor, wait
from multiprocessing.connection import Connection
from typing import Any

from common import REPEATS, alternate, client, compare, figure, process_cpu_seconds

from airflow_epochs.coordination import Attempt, EpochLedger, PipelineConfig
from airflow_epochs.coordination.protocol.pipelined_votes import Ballot

PROCESSES = 8
SIDES = ("ours", "peer", "limit", "limit-batch")


def _worker(hosts: str, conn: Connection, producers: list[int]) -> None:
    """One worker process: votes for ``producers`` when told to, ours or the peer's way."""
    zk = client(hosts)
    pool = ThreadPoolExecutor(max_workers=max(1, len(producers)))
    wait([pool.submit(lambda: None) for _ in producers])
    ledger: EpochLedger | None = None
    locks: dict[int, Any] = {}
    base = ""
    total = 0
    while True:
        message = conn.recv()
        kind = message[0]
        if kind == "stop":
            break
        if kind == "ours-setup":
            ledger = EpochLedger(zk, message[1], owner="bench")
            ledger.config_for(1)  # the configuration is read once, before the clock
            conn.send("ready")
        elif kind == "peer-setup":
            base = message[1]
            locks = {i: zk.Lock(f"{base}/lock", identifier=f"p{i}") for i in producers}
            conn.send("ready")
        elif kind == "ours":
            assert ledger is not None
            attempt = Attempt.from_dict(message[1])
            cpu0 = time.process_time()
            results = ledger.vote_many(attempt, [Ballot(f"part{i}", f"p{i}", {"r": i}) for i in producers])
            failed = [r for r in results if isinstance(r, Exception)]
            if failed:
                raise failed[0]
            conn.send(time.process_time() - cpu0)
        elif kind == "limit-setup":
            base = message[1]
            conn.send("ready")
        elif kind in ("limit", "limit-batch"):
            epoch = message[1]
            cpu0 = time.process_time()
            pending = []
            if kind == "limit":  # one bare multi per vote, all sent before the first answer is awaited
                for i in producers:
                    tx = zk.transaction()
                    tx.create(f"{base}/{epoch}-{i}", b'{"r": %d}' % i)
                    pending.append(tx.commit_async())
            else:  # the worker's votes in one bare multi, as ours sends them
                tx = zk.transaction()
                for i in producers:
                    tx.create(f"{base}/{epoch}-{i}", b'{"r": %d}' % i)
                pending.append(tx.commit_async())
            for sent in pending:
                assert not any(isinstance(r, Exception) for r in sent.get(timeout=30))
            conn.send(time.process_time() - cpu0)
        elif kind == "peer":
            epoch, total = message[1], message[2]

            def ordered_vote(i: int, epoch: int = epoch, total: int = total, base: str = base,
                             locks: dict[int, Any] = locks) -> None:
                with locks[i]:  # a total order: every vote of every epoch under one global lock
                    zk.create(f"{base}/votes/{epoch}-{i}", b'{"r": %d}' % i)
                    raw, stat = zk.get(f"{base}/tally")
                    seen_epoch, count = (int(x) for x in raw.decode().split(":"))
                    count = count + 1 if seen_epoch == epoch else 1
                    zk.set(f"{base}/tally", f"{epoch}:{count}".encode(), version=stat.version)
                    if count == total:
                        zk.set(f"{base}/frontier", str(epoch).encode())

            cpu0 = time.process_time()
            wait([pool.submit(ordered_vote, i) for i in producers])
            conn.send(time.process_time() - cpu0)
    pool.shutdown()
    zk.stop()
    zk.close()


class Harness:
    def __init__(self, hosts: str, producers: int, server_pid: int | None = None) -> None:
        self.producers = producers
        self.server_pid = server_pid
        self.zk = client(hosts)
        ctx = multiprocessing.get_context("spawn")  # no kazoo thread is ever forked
        count = min(producers, PROCESSES)
        self.conns: list[Connection] = []
        self.procs = []
        for w in range(count):
            mine, theirs = ctx.Pipe()
            share = [i for i in range(producers) if i % count == w]
            proc = ctx.Process(target=_worker, args=(hosts, theirs, share), daemon=True)
            proc.start()
            self.conns.append(mine)
            self.procs.append(proc)
        self.runs = 0
        self.cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        self.busy: dict[str, list[float]] = {side: [] for side in SIDES}  # cores in use: workers + server

    def close(self) -> None:
        for conn in self.conns:
            conn.send(("stop",))
        for proc in self.procs:
            proc.join(30)
        self.zk.stop()
        self.zk.close()

    def _all(self, message: tuple[Any, ...]) -> list[Any]:
        for conn in self.conns:
            conn.send(message)
        return [conn.recv() for conn in self.conns]

    def ours(self, epochs: int) -> float:
        self.runs += 1
        name = f"seal{self.producers}-{self.runs}"
        ledger = EpochLedger(self.zk, name, owner="bench")
        ledger.create_pipeline(PipelineConfig({f"part{i}": (f"p{i}",) for i in range(self.producers)},
                                              retain_epochs=None))
        self._all(("ours-setup", name))
        cpu = 0.0
        server0 = process_cpu_seconds(self.server_pid)
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            attempt = ledger.open_epoch(epoch)
            cpu += sum(self._all(("ours", attempt.to_dict())))
        elapsed = time.perf_counter() - started
        self.cpu["ours"].append(cpu / (epochs * self.producers))
        self.busy["ours"].append((cpu + process_cpu_seconds(self.server_pid) - server0) / elapsed)
        assert ledger.frontier() == epochs
        return epochs / elapsed

    def limit(self, epochs: int, kind: str = "limit") -> float:
        """The same workers, each vote one bare multi transaction (``limit``), or each worker's votes one
        bare multi (``limit-batch``), pipelined: what the server and the voters' processes allow at most."""
        self.runs += 1
        base = f"/bench/multi{self.producers}-{self.runs}"
        self.zk.ensure_path(base)
        self._all(("limit-setup", base))
        cpu = 0.0
        server0 = process_cpu_seconds(self.server_pid)
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            cpu += sum(self._all((kind, epoch)))
        elapsed = time.perf_counter() - started
        self.cpu[kind].append(cpu / (epochs * self.producers))
        self.busy[kind].append((cpu + process_cpu_seconds(self.server_pid) - server0) / elapsed)
        assert len(self.zk.get_children(base)) == epochs * self.producers
        return epochs / elapsed

    def peer(self, epochs: int) -> float:
        self.runs += 1
        base = f"/bench/ordered{self.producers}-{self.runs}"
        self.zk.ensure_path(f"{base}/votes")
        self.zk.create(f"{base}/tally", b"0:0")
        self.zk.create(f"{base}/frontier", b"0")
        self._all(("peer-setup", base))
        cpu = 0.0
        server0 = process_cpu_seconds(self.server_pid)
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            cpu += sum(self._all(("peer", epoch, self.producers)))
        elapsed = time.perf_counter() - started
        self.cpu["peer"].append(cpu / (epochs * self.producers))
        self.busy["peer"].append((cpu + process_cpu_seconds(self.server_pid) - server0) / elapsed)
        assert int(self.zk.get(f"{base}/frontier")[0]) == epochs
        return epochs / elapsed


def run(hosts: str, sizes: tuple[int, ...], epochs: int, repeats: int = REPEATS,
        server_pid: int | None = None) -> None:
    """:param server_pid: the ZooKeeper server's pid, to report the cores each side kept busy."""
    for producers in sizes:
        harness = Harness(hosts, producers, server_pid)
        try:
            harness.ours(1)  # warm-up: connections, caches, thread pools
            harness.peer(1)
            harness.limit(1)
            harness.limit(1, "limit-batch")
            harness.cpu = {side: [] for side in SIDES}
            harness.busy = {side: [] for side in SIDES}
            limits: dict[str, list[float]] = {"limit": [], "limit-batch": []}

            def ours_then_limits(h: Harness = harness, limits: dict[str, list[float]] = limits) -> float:
                rate = h.ours(epochs)
                for kind in limits:  # measured right after each of ours, same workers
                    limits[kind].append(h.limit(epochs, kind))
                return rate

            mine, theirs = alternate(repeats, ours_then_limits, lambda h=harness: h.peer(epochs))
            _rows(harness, producers, epochs, repeats, mine, theirs, limits)
        finally:
            harness.close()


def _rows(harness: Harness, producers: int, epochs: int, repeats: int, mine: list[float], theirs: list[float],
          limits: dict[str, list[float]]) -> None:
    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    cpu = {side: median(harness.cpu[side]) * 1000 for side in SIDES}
    busy = {side: median(harness.busy[side]) for side in SIDES}
    compare(f"sealing_eps_p{producers}", "sealing", f"epochs sealed per second, {producers} producers",
            mine, theirs, "epochs/s", "votes under one global lock", better="higher",
            note=f"median of {repeats} runs of {epochs} epochs, alternating; producers in "
                 f"{len(harness.procs)} processes, each process's votes in one transaction (vote_many); CPU per "
                 f"vote {cpu['ours']:.2f} ms ours, {cpu['peer']:.2f} ms peer; cores busy (voters + server) "
                 f"{busy['ours']:.2f} ours, {busy['peer']:.2f} peer",
            cpu_ms_per_vote={"ours": cpu["ours"], "peer": cpu["peer"]},
            cores_busy={"ours": busy["ours"], "peer": busy["peer"]})
    ours = median(mine)
    for kind, row, what in (("limit", "zk_multi_limit", "each vote were one bare multi"),
                            ("limit-batch", "zk_multi_batch_limit", "each process's votes were one bare multi")):
        limit = median(limits[kind])
        figure(f"{row}_eps_p{producers}", "sealing", f"epochs per second if {what}, {producers} producers", limit,
               "epochs/s", f"same workers, same run (each right after one of ours), single creates sent pipelined; "
               f"sealing reaches {100 * ours / limit:.0f} % of it; CPU per vote {cpu[kind]:.2f} ms; "
               f"cores busy {busy[kind]:.2f}", sealing_pct=100 * ours / limit, samples=limits[kind])
