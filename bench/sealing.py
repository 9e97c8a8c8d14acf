"""Sealing vs ordering (group ``sealing``): epochs sealed per second with P producers, each voting on
its own partition, against the naive peer that orders every vote under one global ZooKeeper lock,
and against the limit: the same processes sending each vote as one bare multi transaction (a single
create) through kazoo's async API, pipelined, against the same server (``zk_multi_limit_eps_p*``).

Ours votes the way a process hosting several producers should: ``EpochLedger.vote_many``, every
vote's transaction sent before the first answer is awaited (pipelined on the worker's connection).

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
from airflow_epochs.coordination.pipelined_votes import Ballot

PROCESSES = 8


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
        elif kind == "limit":
            epoch = message[1]
            cpu0 = time.process_time()
            pending = []
            for i in producers:  # one bare multi per vote, all sent before the first answer is awaited
                tx = zk.transaction()
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
        self.cpu: dict[str, list[float]] = {"ours": [], "peer": [], "limit": []}
        self.busy: dict[str, list[float]] = {"ours": [], "peer": [], "limit": []}  # cores in use: workers + server

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

    def limit(self, epochs: int) -> float:
        """The same workers, each vote one bare multi transaction (pipelined): what the server and the
        voters' processes allow at most."""
        self.runs += 1
        base = f"/bench/multi{self.producers}-{self.runs}"
        self.zk.ensure_path(base)
        self._all(("limit-setup", base))
        cpu = 0.0
        server0 = process_cpu_seconds(self.server_pid)
        started = time.perf_counter()
        for epoch in range(1, epochs + 1):
            cpu += sum(self._all(("limit", epoch)))
        elapsed = time.perf_counter() - started
        self.cpu["limit"].append(cpu / (epochs * self.producers))
        self.busy["limit"].append((cpu + process_cpu_seconds(self.server_pid) - server0) / elapsed)
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
            harness.cpu = {"ours": [], "peer": [], "limit": []}
            harness.busy = {"ours": [], "peer": [], "limit": []}
            limits: list[float] = []

            def ours_then_limit(h: Harness = harness, limits: list[float] = limits) -> float:
                rate = h.ours(epochs)
                limits.append(h.limit(epochs))  # measured right after each of ours, same workers
                return rate

            mine, theirs = alternate(repeats, ours_then_limit, lambda h=harness: h.peer(epochs))
            _rows(harness, producers, epochs, repeats, mine, theirs, limits)
        finally:
            harness.close()


def _rows(harness: Harness, producers: int, epochs: int, repeats: int, mine: list[float], theirs: list[float],
          limits: list[float]) -> None:
    def median(side: str, values: dict[str, list[float]]) -> float:
        return sorted(values[side])[len(values[side]) // 2]

    cpu = {side: median(side, harness.cpu) * 1000 for side in ("ours", "peer", "limit")}
    busy = {side: median(side, harness.busy) for side in ("ours", "peer", "limit")}
    compare(f"sealing_eps_p{producers}", "sealing", f"epochs sealed per second, {producers} producers",
            mine, theirs, "epochs/s", "votes under one global lock", better="higher",
            note=f"median of {repeats} runs of {epochs} epochs, alternating; producers in "
                 f"{len(harness.procs)} processes, votes pipelined (vote_many); CPU per vote {cpu['ours']:.2f} ms "
                 f"ours, {cpu['peer']:.2f} ms peer; cores busy (voters + server) {busy['ours']:.2f} ours, "
                 f"{busy['peer']:.2f} peer",
            cpu_ms_per_vote={"ours": cpu["ours"], "peer": cpu["peer"]},
            cores_busy={"ours": busy["ours"], "peer": busy["peer"]})
    limit = sorted(limits)[len(limits) // 2]
    ours = sorted(mine)[len(mine) // 2]
    figure(f"zk_multi_limit_eps_p{producers}", "sealing",
           f"epochs per second if each vote were one bare multi, {producers} producers", limit, "epochs/s",
           f"same workers, same run (each right after one of ours), a single-create multi per vote sent "
           f"pipelined; sealing reaches {100 * ours / limit:.0f} % of it; CPU per vote {cpu['limit']:.2f} ms; "
           f"cores busy {busy['limit']:.2f}", sealing_pct=100 * ours / limit, samples=limits)
